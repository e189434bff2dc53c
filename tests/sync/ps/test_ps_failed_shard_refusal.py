"""A shard you start yourself whose job failed refuses the next job (docs/protocol.md,
"Timeouts and failures"). Once every rank of the failed job had said hello, a worker refused
so came after the failure, whatever its rank: the refusal leads with that cause (the shard
failed before this worker's hello) and the way out, then quotes the failure, so that the live
rank that failure names does not read as if it had failed now.

Real ``distconv train`` workers (one SIGKILLed) and a real shard on 127.0.0.1; a shard driven
by hand for a worker restarted into the job that failed."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from test_ps_stuck import _push_w

from distconv.sync.ps.job_hello import hello_fields
from tests.child_env import child_env
from tests.sync.ps.test_ps_next_job_same_shard import running, train

#: the way out a refused worker is told: the shards' restart, by hand or under Kubernetes
RESTART_THE_SHARDS = (
    "restart the shards (distconv pserver; on Kubernetes, delete the job's pserver pods), "
    "then the workers"
)
#: seconds the first job may take to seed the shard and write its first checkpoint
SETUP_SECONDS = 60


def _wait_for(done, what: str) -> None:
    deadline = time.monotonic() + SETUP_SECONDS
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {SETUP_SECONDS} s", pytrace=False)
        time.sleep(0.1)


def _error_line(stderr: str) -> str:
    """The worker's one-line ending (``distconv train: error: ...``), looked for among its
    lines: once, on a busy machine, its last line was its setup's config line."""
    errors = [line for line in stderr.splitlines() if line.startswith("distconv train: error:")]
    assert len(errors) == 1, stderr[-2000:]
    return errors[0]


def _fail_the_job_by_killing_rank_1(shards, endpoint: str, tmp_path: Path) -> None:
    """Both ranks train on the shard; once rank 0 has written a checkpoint, rank 1 is
    SIGKILLed: the shard fails, naming rank 1's process ended without a bye."""
    argvs = [
        train(endpoint, tmp_path / f"r{r}", "--epochs", "100", "--checkpoint-every", "2",
              rank=r, world=2)
        for r in (0, 1)
    ]  # fmt: skip
    env = child_env()
    procs = [
        subprocess.Popen(a, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for a in argvs
    ]
    try:
        _wait_for(lambda: any((tmp_path / "r0" / "checkpoints").glob("step-*")), "checkpoint")
        procs[1].kill()
        procs[1].wait(timeout=10)
        _, err = procs[0].communicate(timeout=60)
        assert procs[0].returncode == 75, err.decode()[-800:]  # rank 1's victim: right
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    _wait_for(lambda: "job failed" in shards.log_text(), "shard failure")


@pytest.mark.timeout(180)
def test_a_resume_on_a_shard_failed_by_an_earlier_job_leads_with_that_cause(shards, tmp_path):
    (endpoint,) = shards.start(1, workers=2, extra=["--timeout", "10"])
    _fail_the_job_by_killing_rank_1(shards, endpoint, tmp_path)
    resume = [train(endpoint, tmp_path / f"r{r}", "--resume", rank=r, world=2) for r in (0, 1)]
    with running(resume) as ranks:
        refused = ranks()
    for rank, done in enumerate(refused):
        said = _error_line(done.stderr)
        lead = f"rank {rank}, hello: pserver {endpoint}: this shard failed before this worker's"
        assert f"{lead} hello: " in said, said
        assert f"{RESTART_THE_SHARDS};" in said, said
        # the earlier failure quoted after the way out, once
        cause = said.split("(its failure: ", 1)[1]
        assert cause.startswith("rank 1 (host") and "ended without a bye" in cause, said
        assert said.count("rank 1 (host") == 1, said
    # refused for the same cause, a refused start each: none the victim (75) of rank 1
    assert [done.returncode for done in refused] == [1, 1], refused[0].stderr[-800:]


def _hello(h, rank: int, run: int) -> dict:
    """The reply header to a hello of ``rank``'s worker of ``run``."""
    return h.ask({"op": "hello", "rank": rank, "run": run, "host": "h", **hello_fields({})})[0]


@pytest.mark.timeout(30)
def test_a_restarted_worker_of_the_failed_job_is_not_told_of_an_earlier_job(hand):
    """A worker restarted into the job that failed (the kubelet's restart of its container,
    the same Kubernetes Job) is no worker of an earlier job: the refusal says the shard failed
    before its hello, and the restart of the shards, true of the job it is in as of the next."""
    h = hand(workers=2)
    assert [_hello(h, rank, run)["op"] for rank, run in ((0, 1), (1, 2))] == ["ok", "ok"]
    h.seed()
    h.send({"op": "bye", "rank": 1, "run": 2, "error": "RuntimeError: out of memory"})
    _push_w(h, 0, 1)  # held for rank 1, which closed on its error: the shard fails
    replies = [h.read()[0] for _ in range(2)]
    assert h.shard.failed, replies
    for rank, run in ((1, 3), (0, 4)):  # each restarted in the same job
        said = _hello(h, rank, run)
        assert said["op"] == "error" and "failed_ranks" not in said, said
        assert said["error"].startswith("this shard failed before this worker's hello: "), said
        assert "earlier job" not in said["error"], said
        assert RESTART_THE_SHARDS in said["error"], said
        assert "RuntimeError: out of memory" in said["error"], said
