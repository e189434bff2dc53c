"""A shard you start yourself whose job failed refuses the next job (docs/protocol.md,
"Timeouts and failures"). Once every rank of the failed job had said hello, a worker refused
so began after the failure, whatever its rank: the refusal leads with that cause (the shard
failed in an earlier job) and the way out, then quotes the earlier failure, so that the live
rank that failure names does not read as if it had failed now.

Real ``distconv train`` workers (one SIGKILLed) and a real shard on 127.0.0.1."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.child_env import child_env
from tests.sync.ps.test_ps_next_job_same_shard import running, train

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
        lead = f"rank {rank}, hello: pserver {endpoint}: this shard failed in an earlier job: "
        assert lead in said, said
        assert "restart the shards (distconv pserver), then the workers;" in said, said
        # the earlier failure quoted after the way out, once
        cause = said.split("(the earlier job's failure: ", 1)[1]
        assert cause.startswith("rank 1 (host") and "ended without a bye" in cause, said
        assert said.count("rank 1 (host") == 1, said
    # refused for the same cause, a refused start each: none the victim (75) of rank 1
    assert [done.returncode for done in refused] == [1, 1], refused[0].stderr[-800:]
