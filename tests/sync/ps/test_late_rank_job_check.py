"""A rank late to the start-up job check, past the shards' ``--timeout``: the worker that came
first waits for it, saying hello again, and the job trains; one that never comes stops the
waiting worker after a bounded time, naming it, and the shard fails nothing.

Before, shard 0 failed the job at its timeout, the first worker exited, and the late one was
refused by the failed shard: under a restart back-off (the kubelet's) with a short
``--timeout``, the workers never met again. Real shards and real ``distconv train`` workers,
processes on 127.0.0.1.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from ps_helpers import shard_argv

from distconv.sync.ps.channel import GRACE
from distconv.sync.ps.late_job_check import NOT_FAILED, SHARD_SILENT_AT_HELLO
from distconv.sync.ps.late_ranks import JOB_CHECK_ROUNDS
from tests.child_env import child_env
from tests.processes import job_env

#: the shards' and the workers' --timeout (short, as in the job that looped)
TIMEOUT = 1.0
#: how long after rank 0 rank 1 starts: past the shard's timeout and rank 0's own wait
LATE = 3.0
DOCS = Path(__file__).resolve().parents[3] / "docs"
#: the most a worker may take to start and train one epoch of the synthetic set on a busy host
RUN_SECONDS = 60


def _worker(rank: int, endpoint: str, out: Path, env: dict[str, str]) -> subprocess.Popen:
    argv = [sys.executable, "-m", "distconv", "train", "--data", "synthetic", "--epochs", "1",
            "--no-progress", "--sync", "pserver", "--rank", str(rank), "--world-size", "2",
            "--pservers", endpoint, "--insecure", "--timeout", str(TIMEOUT), "--resume", "auto",
            "--out", str(out / f"w{rank}")]  # fmt: skip
    log = open(out / f"worker{rank}.log", "w")
    try:
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    finally:
        log.close()


def _shard(shards, tmp_path: Path) -> str:
    argv = shard_argv(["-m", "distconv"], workers=2, timeout=TIMEOUT)
    return shards.launch(argv, tmp_path / "shard0.log")


@pytest.mark.timeout(120)
def test_a_rank_late_past_the_timeout_is_waited_for_and_the_job_trains(shards, tmp_path):
    """Rank 1 starts ``LATE`` seconds after rank 0, past the shard's timeout: rank 0 says hello
    again while it waits (naming why), both train their epoch and exit 0, and the shard never
    fails the job."""
    endpoint = _shard(shards, tmp_path)
    with job_env(child_env()) as env:
        first = _worker(0, endpoint, tmp_path, env)
        time.sleep(LATE)
        late = _worker(1, endpoint, tmp_path, env)
        codes = [first.wait(RUN_SECONDS), late.wait(RUN_SECONDS)]
    logs = [(tmp_path / f"worker{r}.log").read_text() for r in (0, 1)]
    assert codes == [0, 0], "\n".join(logs) + shards.log_text()
    assert "ranks late to the job check, saying hello again" in logs[0]
    assert "sent nothing for all_equal:1" in logs[0]  # the shard's words, quoted
    assert "job failed" not in shards.log_text()
    assert "the job is not failed" in shards.log_text()


@pytest.mark.timeout(120)
def test_a_rank_that_never_comes_stops_the_waiting_worker_after_a_bounded_time(shards, tmp_path):
    """Rank 1 never starts: rank 0 makes its job check ``JOB_CHECK_ROUNDS`` times, each a wait
    of the shard's timeout, then exits 75 (another rank's failure) naming rank 1 and how long
    it waited; the shard fails nothing, so a later start of the job is served without its
    restart."""
    endpoint = _shard(shards, tmp_path)
    began = time.monotonic()
    with job_env(child_env()) as env:
        code = _worker(0, endpoint, tmp_path, env).wait(RUN_SECONDS)
    took = time.monotonic() - began
    log = (tmp_path / "worker0.log").read_text()
    assert code == 75, log
    assert "rank 1 (which never said hello) sent nothing for all_equal:1" in log
    assert "never came: the job cannot start without them; start them, or raise" in log
    # each round's line says the whole bound, in the shard's --timeout
    bound = f"of about {JOB_CHECK_ROUNDS * TIMEOUT:.0f} s at most: shard 0's --timeout 1 s a round"
    assert log.count(bound) == JOB_CHECK_ROUNDS - 1, log
    assert log.count("saying hello again") == JOB_CHECK_ROUNDS - 1, log
    # bounded: the rounds of the shard's timeout, and the start of the process
    assert took < JOB_CHECK_ROUNDS * (TIMEOUT + 0.5) + 20, took
    assert "job failed" not in shards.log_text()


def test_the_docs_give_the_code_s_rounds_and_words():
    """docs/protocol.md, docs/kubernetes.md and docs/operations.md state the rounds and quote
    the shard's words and a round's bound."""
    protocol, k8s, operations = (
        " ".join((DOCS / n).read_text().split())
        for n in ("protocol.md", "kubernetes.md", "operations.md")
    )
    assert f"up to {JOB_CHECK_ROUNDS} rounds in all" in protocol
    bound = "S s waited of about T s at most: shard 0's --timeout X s a round"
    assert f"(round N of {JOB_CHECK_ROUNDS}, {bound})" in protocol
    assert f"followed by `; {NOT_FAILED}`" in protocol
    assert f"up to {JOB_CHECK_ROUNDS} rounds of the shards' `--timeout`" in k8s
    at_20 = f"about {JOB_CHECK_ROUNDS * 20} s at most: shard 0's --timeout 20 s a round"
    assert f"(round N of {JOB_CHECK_ROUNDS}, S s waited of {at_20})" in k8s
    assert f"up to {JOB_CHECK_ROUNDS} rounds of the shard's `--timeout`" in operations
    assert "or the shard fails on the peer that never came" not in operations
    # a worker that gave up on a shard still down is late, not failed (late_job_check.py)
    assert f"{GRACE:g} x their `--timeout`: `{SHARD_SILENT_AT_HELLO}N`" in k8s
