"""A shard you start yourself stays up after its workers' ``bye`` (docs/operations.md), and
serves the next job, as a restarted shard would: it once kept the first accepted hello's job
for good, so a ``--resume`` that adds epochs (as the README shows for going on with a run)
was refused on the shards of the run it resumes, blaming a rank of its own run that agreed
with it; and a worker started with a typo, which refused itself after the shard took its
hello as the job's, kept its corrected worker out. Only a restart of the shards helped.

A shard whose job failed keeps refusing, as documented (docs/protocol.md, "Timeouts and
failures"), in words that say the failure is of an earlier job and that the shards must be
restarted.

Real ``distconv train`` workers and real shards on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from distconv.sync.ps.job_hello import hello_fields
from tests.child_env import child_env
from tests.processes import job_env, run_job

MODES = ["sync", "async"]


def train(endpoint: str, out: Path, *args: str, rank: int = 0, world: int = 1) -> list[str]:
    """``distconv train`` argv of ``rank`` of ``world`` on the shard at ``endpoint``."""
    return [sys.executable, "-m", "distconv", "train", "--pservers", endpoint, "--insecure",
            "--data", "synthetic", "--epochs", "1", "--batch-size", "32", "--no-progress",
            "--rank", str(rank), "--world-size", str(world), "--out", str(out), *args]  # fmt: skip


def run(argv: list[str]) -> subprocess.CompletedProcess:
    return run_job(argv, child_env(), timeout=60)


@contextlib.contextmanager
def running(argvs: list[list[str]]) -> Iterator[Callable[[], list[subprocess.CompletedProcess]]]:
    """The workers of ``argvs`` started together; the ``with`` gets a call that waits for them
    and returns their results. Any still running at its end is killed."""
    procs = [
        subprocess.Popen(a, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for a in argvs
    ]

    def results() -> list[subprocess.CompletedProcess]:
        done = []
        for p, a in zip(procs, argvs):
            out, err = p.communicate(timeout=60)
            done.append(subprocess.CompletedProcess(a, p.returncode, out.decode(), err.decode()))
        return done

    try:
        yield results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()


def last_metrics(out: Path) -> dict:
    return json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", MODES)
def test_a_resume_with_more_epochs_runs_on_the_shard_of_the_run_it_resumes(shards, tmp_path, mode):
    (endpoint,) = shards.start(1, workers=1, mode=mode)
    (fresh,) = shards.start(1, workers=1, mode=mode)
    with running([train(fresh, tmp_path / "whole", "--epochs", "2")]) as straight_run:
        first = run(train(endpoint, tmp_path / "run"))
        assert first.returncode == 0, first.stderr[-800:]
        more = run(train(endpoint, tmp_path / "run", "--resume", "--epochs", "2"))
        assert more.returncode == 0, more.stderr[-800:]
        (whole,) = straight_run()
    assert whole.returncode == 0, whole.stderr[-800:]
    resumed, straight = last_metrics(tmp_path / "run"), last_metrics(tmp_path / "whole")
    assert resumed["epoch"] == straight["epoch"] == 2
    # nothing of the first run's shard state (optimizer state, step counts) leaks into the
    # resume: it ends as a run of two epochs on a fresh shard does
    for key in ("train_loss", "test_loss", "test_acc"):
        assert resumed[key] == straight[key], key


@pytest.mark.timeout(120)
def test_a_worker_that_refused_itself_leaves_the_shard_to_the_corrected_one(shards, tmp_path):
    (endpoint,) = shards.start(1, workers=2)
    typo = run(train(endpoint, tmp_path / "typo"))  # --world-size 1 against --workers 2
    assert typo.returncode == 1
    assert "is set up as" in typo.stderr and "'workers': 2" in typo.stderr, typo.stderr[-800:]
    with running([train(endpoint, tmp_path / f"r{r}", rank=r, world=2) for r in (0, 1)]) as ranks:
        both = ranks()
    for done in both:
        assert done.returncode == 0, done.stderr[-800:]
    assert last_metrics(tmp_path / "r0")["world_size"] == 2


@pytest.mark.timeout(120)
def test_a_start_refused_on_different_jobs_leaves_the_shard_to_the_next_one(shards, tmp_path):
    """Rank 1 comes with another batch size while rank 0 waits in its job check (saying hello
    again, as for a late rank): refused, it closes, and both exit 1 on the ranks' different
    jobs. Nothing was seeded and no rank failed on its own, so the shard did not fail: the
    corrected start trains on it. (A rank that never comes fails no job:
    test_late_rank_job_check.py; a failed shard refuses the next job:
    test_ps_failed_shard_refusal.py.)"""
    (endpoint,) = shards.start(1, workers=2, extra=["--timeout", "1"])
    log = tmp_path / "alone.log"
    with log.open("w") as err, job_env(child_env()) as env:
        alone = subprocess.Popen(train(endpoint, tmp_path / "alone", world=2), env=env,
                                 stderr=err, text=True)  # fmt: skip
        _wait_for_line(log, "saying hello again", alone)  # rank 0 is in: its hello bound the job
        other = run(train(endpoint, tmp_path / "other", "--batch-size", "16", rank=1, world=2))
        assert alone.wait(60) == 1, log.read_text()[-800:]  # refused: the ranks' jobs differ
    assert other.returncode == 1, other.stderr[-800:]
    different = "rank 1 and rank 0 run different jobs: config.batch_size: 16 here, 32 there"
    assert different in log.read_text(), log.read_text()[-800:]
    assert "the shards serve the next start" in log.read_text(), log.read_text()[-800:]
    with running([train(endpoint, tmp_path / f"r{r}", rank=r, world=2) for r in (0, 1)]) as ranks:
        both = ranks()
    for done in both:
        assert done.returncode == 0, done.stderr[-800:]
    assert "job failed" not in shards.log_text()


def _wait_for_line(log: Path, words: str, proc: subprocess.Popen, seconds: float = 60) -> None:
    """Return once ``log`` holds ``words``; fail where ``proc`` exits or ``seconds`` pass."""
    end = time.monotonic() + seconds
    while words not in log.read_text():
        assert proc.poll() is None and time.monotonic() < end, log.read_text()[-800:]
        time.sleep(0.1)


def _hello(h, rank: int, run: int) -> None:
    head = {"op": "hello", "rank": rank, "run": run, "host": "h", **hello_fields({})}
    assert h.ask(head)[0]["op"] == "ok"


def _gather(h, rank: int, run: int, tag: str) -> None:
    h.send({"op": "gather", "rank": rank, "run": run, "tag": tag, "value": None})


@pytest.mark.timeout(30)
def test_a_stray_worker_of_the_job_before_is_refused_not_taken_into_the_next(hand):
    """Rank 1 of the job before started again (run 3) while its worker of run 2 lived on; the
    job ended with run 3's bye. Once the next job has bound the shard, run 2's requests are of
    that job, not the next one's: its gather is refused, not held as rank 1's (which failed
    the next job at once, its ranks at different points of it), and its bye is no rank's."""
    h = hand(workers=2)
    _hello(h, 0, 1)
    _hello(h, 1, 2)
    _hello(h, 1, 3)  # rank 1 started again; its worker of run 2 is still alive
    for rank, run in ((0, 1), (1, 3)):
        _gather(h, rank, run, "all_equal:1")
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]
    h.seed()
    for rank, run in ((0, 1), (1, 3)):
        assert h.ask({"op": "bye", "rank": rank, "run": run})[0]["op"] == "ok"
    _hello(h, 0, 11)  # the next job
    _gather(h, 0, 11, "all_equal:1")
    said = h.answer({"op": "gather", "rank": 1, "run": 2, "tag": "barrier:7", "value": None})
    assert said is not None and said["op"] == "error", said
    assert "of a job before on this shard, which ended" in said["error"], said
    bye = {"op": "bye", "rank": 1, "run": 2, "error": "RuntimeError: stray"}
    assert h.ask(bye)[0]["op"] == "ok"
    assert not h.shard.failed and not h.shard.left, h.shard.failed
    _hello(h, 1, 12)
    _gather(h, 1, 12, "all_equal:1")
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]
    assert not h.shard.failed
