"""A shard stopped alone by SIGTERM while its workers train (``systemctl stop`` or a reboot of
its host, by an operator who runs the shards by hand): it asks them for the checkpointed stop
their own SIGTERM gives, so they stop within 8 steps with a checkpoint, exit 143, and a resume
goes on exactly as a run never stopped. Before, the workers trained on until the shard failed
the job, and the work since their last checkpoint (up to an epoch) was lost.

Real shard processes and real ``distconv train`` workers on 127.0.0.1, each worker saying a
host name of its own (``HOSTNAME``), as on other hosts: a shard follows only the processes of
workers on its own host.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.stop_agreement import STOP_CHECK_EVERY
from distconv.stop_request import EXIT_STATUS
from tests.child_env import child_env
from tests.launcher.launch_cli import wait_while_running
from tests.processes import job_env

#: the shards' and workers' --timeout: waiting it out would fail the test's deadlines
TIMEOUT = 30
#: the steps of an epoch: 384 synthetic examples, 2 workers of batch 8
STEPS_PER_EPOCH = 24
#: long enough a run that the signal comes mid-run (about 70 steps a second here)
EPOCHS = 30
#: seconds the workers may take from the shard's signal to their exit: far under TIMEOUT
STOPPED_WITHIN = 20
#: what each record of metrics.jsonl must hold alike in a resumed run and one never stopped
COMPARED = ("epoch", "step", "train_loss", "train_acc", "test_loss", "test_acc")


def worker(endpoints: list[str], rank: int, out: Path, env, log: Path, *extra: str):
    """``distconv train`` as ``rank`` of 2 on ``endpoints`` (float64: the resume is compared
    bitwise), on a host of its own name (``pod-RANK``), its output in ``log``."""
    argv = [sys.executable, "-m", "distconv", "train", "--data", "synthetic", "--epochs",
            str(EPOCHS), "--batch-size", "8", "--optimizer", "sgd", "--dtype", "float64",
            "--pservers", ",".join(endpoints), "--rank", str(rank), "--world-size", "2",
            "--insecure", "--timeout", str(TIMEOUT), "--out", str(out), "--no-progress",
            *extra]  # fmt: skip
    with open(log, "w") as err:
        return subprocess.Popen(
            argv, env={**env, "HOSTNAME": f"pod-{rank}"}, stdout=subprocess.DEVNULL, stderr=err
        )


def job(shards, folder: Path, env, *extra: str, mode: str = "sync") -> list[subprocess.Popen]:
    """Two fresh shards (``mode``, draining up to 60 s) and two workers on them, rank R's
    output folder ``folder/outR`` and its log ``folder/rankR.log`` (``extra``: the workers' own
    flags)."""
    drain = ("--timeout", str(TIMEOUT), "--drain-seconds", "60")
    endpoints = shards.start(2, 2, mode=mode, extra=drain)
    folder.mkdir(exist_ok=True)
    again = "-again" if extra else ""
    return [
        worker(endpoints, r, folder / f"out{r}", env, folder / f"rank{r}{again}.log", *extra)
        for r in range(2)
    ]


def stopped_by_a_shard(shards, folder: Path, env, mode: str) -> int:
    """Train a job in ``folder`` (:func:`job`) and SIGTERM its shard 1 alone mid-run; the step
    the workers stopped after, once each exited 143 with its checkpoint there, at a stop check
    after the signal, and the shard exited 0 after them, having failed nothing."""
    log = folder / "rank1.log"  # a rank the signal did not reach either
    procs = job(shards, folder, env, mode=mode)
    wait_while_running(lambda: epochs_done(log) >= 2, procs[1], "epoch 2", 60)
    signalled_after = epochs_done(log) * STEPS_PER_EPOCH  # at least this many steps
    stopped_shard = shards.procs[-1]  # shard 1 of this job; shard 0 and the workers go on
    stopped_shard.send_signal(signal.SIGTERM)
    statuses = ended(procs, STOPPED_WITHIN)
    text = log.read_text()
    assert statuses == [EXIT_STATUS[signal.SIGTERM]] * 2, text[-3000:]
    # the shard goes once they said bye, after their checkpoint, and failed nothing
    assert ended([stopped_shard], 10) == [0], shards.log_text()[-3000:]
    assert "job failed" not in shards.log_text()

    line = next(t for t in text.splitlines() if "pserver shard 1 got SIGTERM" in t)
    step = int(line.split("stopped after step ")[1].split(":")[0])
    assert step > signalled_after and step % STOP_CHECK_EVERY == 0, line
    assert step < EPOCHS * STEPS_PER_EPOCH, "the run ended before the shard's signal"
    assert (folder / "out0" / "checkpoints" / f"step-{step:08d}.json").exists()
    return step


def resumed(shards, folder: Path, env, step: int, mode: str = "sync") -> None:
    """Resume the job stopped in ``folder`` after ``step`` on fresh shards, to its end."""
    procs = job(shards, folder, env, "--resume", "auto", mode=mode)
    again = (folder / "rank0-again.log").read_text
    assert ended(procs, 120) == [0, 0], again()[-3000:]
    assert f"at step {step}" in again()


def ended(procs: list[subprocess.Popen], seconds: float) -> list[int | None]:
    """Each of ``procs``' exit status, None for one still running after ``seconds``."""
    statuses = []
    for proc in procs:
        try:
            statuses.append(proc.wait(timeout=seconds))
        except subprocess.TimeoutExpired:
            statuses.append(None)
    return statuses


def records(out: Path) -> list[dict]:
    """The compared fields of each epoch's record in ``out``'s metrics.jsonl."""
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: json.loads(line).get(k) for k in COMPARED} for line in lines]


def epochs_done(log: Path) -> int:
    """How many epoch lines ``log`` holds."""
    return log.read_text().count(f"/{EPOCHS}  train_loss")


@pytest.mark.timeout(240)
def test_a_shard_stopped_alone_stops_its_workers_with_a_checkpoint_that_resumes_exactly(
    shards, tmp_path
):
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    with job_env(child_env(OMP_NUM_THREADS="1")) as env:
        reference = job(shards, whole, env)
        assert ended(reference, 120) == [0, 0], (whole / "rank0.log").read_text()[-2000:]
        step = stopped_by_a_shard(shards, stopped, env, "sync")
        resumed(shards, stopped, env, step)
    assert records(stopped / "out0") == records(whole / "out0")


@pytest.mark.timeout(180)
def test_an_async_shard_stopped_alone_stops_its_workers_with_a_checkpoint(shards, tmp_path):
    """Async mode: the same stop, at a step every rank agrees on; the resume goes on from it
    (the ranks' steps interleave as they come, so no run is bitwise another's)."""
    with job_env(child_env(OMP_NUM_THREADS="1")) as env:
        step = stopped_by_a_shard(shards, tmp_path, env, "async")
        resumed(shards, tmp_path, env, step, mode="async")
