"""A real ``distconv-launch local`` job (2 workers, 1 shard) whose one child gets a signal
the launcher did not send, as a preemption agent or an operator's ``kill`` of one pid does.

- One worker's SIGTERM: the ranks stop together with a checkpoint, the launcher blames the
  worker whose line says the signal was its own (not whichever exited first), and says how
  to go on; under ``distconv-launch mpi`` (one ``mpiexec``), the report names the rank.
- The launcher's SIGKILL: the children stop on the kernel's SIGTERM, and, their output's
  reader gone, write the lines of their stop into their logs themselves, saying the launcher
  ended; the launcher's own SIGTERM stops them with no such words.
- The shard's SIGTERM alone: it drains and asks the workers for their checkpointed stop,
  which the launcher reports as such, with the way on. A shard whose drain ended with workers
  still in (of an older release, which ignore the ask) fails the attempt once they fail
  without it, not after the grace.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from launcher.mpi import detect_flavor
from tests.child_env import child_path
from tests.launcher.launch_cli import launcher_env
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import job_env, job_left, job_processes
from tests.source_copy import copy_ignoring_stop_asks

# launcher_env: its HOME is each test's own (conftest.py)
ENV = launcher_env({**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"})
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_RESTART"):
    ENV.pop(_name, None)
JOB = "preempted"
#: a local job of 2 workers and 1 shard; an mpi job of 2 ranks
LOCAL = ("local", "--workers", "2", "--servers", "1")
MPI = ("mpi", "-np", "2")


def launch(
    tmp_path: Path, env: Mapping[str, str], epochs: int, *options: str, how: tuple = LOCAL
) -> subprocess.Popen:
    """``distconv-launch`` (``how``: its command and sizes) on synthetic data (3 steps an
    epoch), its output in ``tmp_path``'s ``out.txt`` and ``err.txt``."""
    argv = [
        sys.executable, "-m", "launcher", *how, "--job-id", JOB, *options, "--",
        "--data", "synthetic", "--epochs", str(epochs), "--batch-size", "64", "--no-progress",
    ]  # fmt: skip
    with open(tmp_path / "out.txt", "w") as out, open(tmp_path / "err.txt", "w") as err:
        return subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=out, stderr=err)


def log(tmp_path: Path, name: str) -> str:
    """The child ``name``'s log (``worker-1``), as far as it is written."""
    path = tmp_path / "runs" / JOB / "logs" / f"{name}.log"
    return path.read_text() if path.exists() else ""


def signalled_launch(
    tmp_path: Path,
    epochs: int,
    marks: set[str],
    *options: str,
    how: tuple = LOCAL,
    watched: str = "worker-0",
    seconds: float = 90,
    base: Mapping[str, str] = ENV,
) -> tuple[int, str, float]:
    """A :func:`launch` whose child with ``marks`` gets SIGTERM once epoch 1 was trained
    (:func:`signal_child`): the launcher's exit status, its stderr, and the seconds from the
    signal to its exit. Nothing of the job outlives it. ``base``: the launcher's environment
    (its ``PYTHONPATH`` another build's)."""
    with job_env(base) as env:
        launcher = launch(tmp_path, env, epochs, *options, how=how)
        try:
            signal_child(tmp_path, env, launcher, marks, watched=watched)
            signalled = time.monotonic()
            status, err = ended(launcher, tmp_path, seconds)
            return status, err, time.monotonic() - signalled
        finally:
            launcher.kill()
            launcher.wait()


def signal_child(
    tmp_path: Path,
    env: Mapping[str, str],
    launcher: subprocess.Popen,
    marks: set[str],
    watched: str = "worker-0",
) -> None:
    """SIGTERM to the one child whose environment holds ``marks`` (``RANK=1``), once the
    log ``watched`` says epoch 1 was trained."""
    trained_epoch_1(tmp_path, launcher, watched)
    os.kill(child_pid(env, marks), signal.SIGTERM)


def trained_epoch_1(tmp_path: Path, launcher: subprocess.Popen, watched: str = "worker-0") -> None:
    """Return once the log ``watched`` says epoch 1 was trained."""
    deadline = time.monotonic() + 60
    while "epoch 1/" not in log(tmp_path, watched):
        assert launcher.poll() is None, (tmp_path / "err.txt").read_text()[-3000:]
        assert time.monotonic() < deadline, f"{watched} never said epoch 1"
        time.sleep(0.02)


def child_pid(env: Mapping[str, str], marks: set[str]) -> int:
    """The pid of the job's ``distconv`` process whose environment holds ``marks``."""
    for pid, command in job_processes(env).items():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if {m.encode() for m in marks} <= set(environ) and "distconv" in command:
            return pid
    raise AssertionError(f"no process with {marks} among {job_processes(env)}")


def ended(launcher: subprocess.Popen, tmp_path: Path, seconds: float = 90) -> tuple[int, str]:
    """The launcher's exit status and its stderr."""
    status = launcher.wait(seconds)
    return status, (tmp_path / "err.txt").read_text()


@pytest.mark.timeout(150)
def test_one_workers_sigterm_blames_that_worker_and_says_how_to_go_on(tmp_path):
    status, err, _ = signalled_launch(tmp_path, 400, {"DISTCONV_ROLE=worker", "RANK=1"})
    assert status == 143, err[-3000:]
    own = re.search(r"stopped by SIGTERM after step (\d+)", log(tmp_path, "worker-1"))
    assert own, log(tmp_path, "worker-1")[-2000:]
    step = own.group(1)
    assert log(tmp_path, "worker-1").count("stopped by") == 1  # its launcher read it: once
    others = f"stopped after step {step}: rank 1 got SIGTERM"
    assert others in log(tmp_path, "worker-0"), log(tmp_path, "worker-0")[-2000:]
    report = json.loads((tmp_path / "runs" / JOB / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 1, 143), report
    headline = (
        f"worker 1 stopped by its own SIGTERM after step {step}, with a checkpoint (exit code"
    )
    assert headline in err, err[-3000:]  # no crash: not "failed with exit code 143"
    hint = (
        f"a checkpointed stop, not a crash: worker 1 got SIGTERM itself, and the ranks stopped "
        f"together after step {step} with a checkpoint; to go on with this run, give the same "
        f"command (and --resume auto after --"  # its --job-id {JOB} not said again
    )
    assert hint in err, err[-3000:]


@pytest.mark.timeout(150)
def test_one_ranks_sigterm_under_mpi_names_that_rank(tmp_path):
    mpich = detect_flavor(mpiexec_or_skip()) == "mpich"  # each names a rank its own way
    rank_1 = {"PMI_RANK=1"} if mpich else {"OMPI_COMM_WORLD_RANK=1"}
    status, err, _ = signalled_launch(tmp_path, 400, rank_1, how=MPI, watched="mpiexec-0")
    assert status == 143, err[-3000:]
    lines = log(tmp_path, "mpiexec-0")
    step = re.search(r"\[1\] distconv train: stopped by SIGTERM after step (\d+)", lines)
    assert step, lines[-3000:]
    assert f"[0] distconv train: stopped after step {step.group(1)}: rank 1 got SIGTERM" in lines
    headline = f"mpiexec 0 stopped after step {step.group(1)} because rank 1 got SIGTERM, with a"
    assert headline in err, err[-3000:]
    assert "a checkpointed stop, not a crash: rank 1 got SIGTERM" in err, err[-3000:]


@pytest.mark.timeout(150)
def test_a_shard_signalled_alone_stops_the_job_with_a_checkpoint(tmp_path):
    """It asks the workers for the stop their own SIGTERM gives: the launch ends as that
    stop, with the way on (whichever exits first: test_preempt_drained_shard's, on
    stand-ins), where the workers trained on until the shard failed the job, losing the
    steps since their last checkpoint."""
    status, err, _ = signalled_launch(tmp_path, 100000, {"DISTCONV_ROLE=server", "RANK=0"})
    assert status == 143, err[-3000:]
    assert "a checkpointed stop, not a crash: pserver shard 0 got SIGTERM" in err, err[-3000:]
    report = json.loads((tmp_path / "runs" / JOB / "failure.json").read_text())
    assert (report["role"], report["exit_code"]) == ("worker", 143), report


@pytest.mark.timeout(150)
def test_a_shard_that_drained_out_under_training_workers_still_fails_the_attempt(tmp_path):
    """Its drain ends 10 s after the signal (the workers, of an older release, ignore its ask
    to stop and trained on 16 steps); it fails the job naming itself, every worker stops at
    once on its words as its victim (exit 75), and the launcher reports the shard, whichever
    exit it sees first (the workers' often comes first), not after waiting out the grace for
    workers that will not finish."""
    shard = {"DISTCONV_ROLE=server", "RANK=0"}
    older = copy_ignoring_stop_asks(tmp_path / "older")
    base = {**ENV, "PYTHONPATH": child_path(older)}
    status, err, took = signalled_launch(
        tmp_path, 100000, shard, "--grace", "60", seconds=120, base=base
    )
    assert status == 1, err[-3000:]
    # the victims named are those that had exited when the launcher reported: one of them may
    # still be closing as the shard's exit comes first, and be stopped with the rest
    headline = re.compile(
        r"server 0 exited \(code 0\) while workers were running \(after 0 restart\(s\)\); "
        r"(worker [01](?:, worker 1)?) stopped because of it \(exit code 75\)"
    )
    found = headline.search(err)
    assert found, err[-3000:]
    assert "failed with exit code" not in err, err[-3000:]  # no worker blamed
    said = "shard 0 stopped on its SIGTERM while rank(s) 0, 1 trained on 16 steps"
    assert f"shard 0: job failed: {said}" in log(tmp_path, "server-0")
    for victim in found[1].split(", "):  # each stopped on the shard's words
        name = victim.replace(" ", "-")
        assert said in log(tmp_path, name), log(tmp_path, name)[-3000:]
    assert took < 40, f"reported {took:.0f} s after the shard's signal: it waited the grace"


@pytest.mark.timeout(150)
def test_a_killed_launchers_workers_write_their_stop_into_their_logs(tmp_path):
    with job_env(ENV) as env:
        launcher = launch(tmp_path, env, 100000)
        try:
            trained_epoch_1(tmp_path, launcher)
            launcher.kill()
            launcher.wait()
            left = job_left(env, 60)
            assert left == {}, f"the job outlived its launcher by 60 s: {left}"
        finally:
            launcher.kill()
            launcher.wait()
    # the kernel's parent-death SIGTERM reads as a scheduler's stop unless the line says why
    ended = rf"stopped by SIGTERM after step \d+ \(the launcher, pid {launcher.pid}, ended\)$"
    for name in ("worker-0", "worker-1"):
        said = log(tmp_path, name)
        assert re.search(ended, said, re.M), said[-2000:]


@pytest.mark.timeout(150)
def test_a_launchers_own_sigterm_leaves_the_stop_line_at_its_step(tmp_path):
    """A scheduler's SIGTERM to the launcher: it stops its workers, alive, and their stop line
    ends at the step, as any scheduler's stop does; '(the launcher, pid P, ended)' is for a
    launcher that died (above)."""
    with job_env(ENV) as env:
        launcher = launch(tmp_path, env, 100000)
        try:
            trained_epoch_1(tmp_path, launcher)
            launcher.send_signal(signal.SIGTERM)
            status, err = ended(launcher, tmp_path)
        finally:
            launcher.kill()
            launcher.wait()
    assert status == 143, err[-3000:]
    for name in ("worker-0", "worker-1"):
        said = log(tmp_path, name)
        assert re.search(r"stopped by SIGTERM after step \d+$", said, re.M), said[-2000:]
        assert "ended)" not in said, said[-2000:]
