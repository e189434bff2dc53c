"""A benchmark driver stopped by SIGTERM (``timeout``, a CI cancel, ``kill``) stops what it
started: ``pserver.py``'s echo servers and shards, ``allreduce.py``'s ``mpiexec`` jobs and
their ranks. Each ran on for a minute or for ever, adopted by init, loading the cores under
whatever was measured next. A SIGKILLed driver, which runs no cleanup, takes them with it
too (Linux)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.child_env import child_env, child_path
from tests.mpi.common import NEEDS_MPIEXEC
from tests.processes import job_env, job_left, job_processes
from tests.test_benchmark_torch import fake_torch

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
#: long enough that the run is still measuring when the signal comes, small enough to be cheap
PSERVER = ["--mb", "1", "--params", "2", "--repeat", "100000", "--modes", "insecure"]
ALLREDUCE = ["--mb", "1", "--grads", "2", "--reps", "100000", "--compute-ms", "0.1"]
ALLREDUCE += ["--no-torch", "--no-cnn"]


def needing_mpiexec(test: Callable) -> Callable:
    """``test`` with the marks of a test that runs ``mpiexec`` (skipped where there is none)."""
    for mark in NEEDS_MPIEXEC:
        test = mark(test)
    return test


def started(argv: list[str], env: dict[str, str], ready: Callable[[list[str]], bool]):
    """``argv`` started with ``env``, once ``ready`` holds of its job's command lines."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not ready(list(job_processes(env).values())):
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the driver never started its children"
        time.sleep(0.1)
    return proc


def pserver_children(lines: list[str]) -> bool:
    """Both echoes and both shards are up."""
    echoes = sum("--echo" in line for line in lines)
    return echoes == 2 and sum("distconv pserver" in line for line in lines) == 2


def stopped(proc: subprocess.Popen, signum: int) -> int:
    """Send ``signum`` to ``proc``; its exit status."""
    proc.send_signal(signum)
    try:
        return proc.wait(timeout=30)
    finally:
        proc.stderr.close()


@pytest.mark.timeout(120)
def test_sigterm_to_the_pserver_benchmark_stops_its_echoes_and_shards(tmp_path):
    """The cleanup in ``run_mode``'s ``finally`` never ran: two echoes (serving for ever) and
    two shards outlived the driver, and its keys directory was left behind."""
    argv = [sys.executable, str(BENCHMARKS / "pserver.py"), *PSERVER]
    with job_env(child_env(TMPDIR=str(tmp_path))) as env:
        proc = started(argv, env, pserver_children)
        status = stopped(proc, signal.SIGTERM)
        assert job_left(env, 10) == {}
        assert status == 128 + signal.SIGTERM  # the shell's status for a death by SIGTERM
    assert list(tmp_path.iterdir()) == []  # the keys' temporary directory removed too


@pytest.mark.timeout(120)
def test_a_killed_pserver_benchmark_takes_its_echoes_and_shards_with_it(tmp_path):
    """A driver killed with SIGKILL runs no cleanup: its echoes, a ``while True`` loop, served
    for ever, and its shards waited on for their worker. They end with their driver; only the
    keys' temporary folder is left, named as the docs say."""
    argv = [sys.executable, str(BENCHMARKS / "pserver.py"), *PSERVER]
    with job_env(child_env(TMPDIR=str(tmp_path))) as env:
        proc = started(argv, env, pserver_children)
        stopped(proc, signal.SIGKILL)
        assert job_left(env, 10) == {}
    assert [p.name.startswith("pserver-benchmark-keys-") for p in tmp_path.iterdir()] == [True]


@pytest.mark.timeout(120)
@needing_mpiexec
def test_sigterm_to_the_allreduce_benchmark_stops_its_mpiexec_job():
    """``together()``'s ``finally`` kills the jobs' process groups, but SIGTERM ended the
    driver without running it: mpiexec and both ranks ran on for the rest of their reps."""
    argv = [sys.executable, str(BENCHMARKS / "allreduce.py"), *ALLREDUCE]
    with job_env(child_env()) as env:
        proc = started(argv, env, lambda lines: sum("--worker" in x for x in lines) >= 3)
        status = stopped(proc, signal.SIGTERM)
        assert job_left(env, 15) == {}
        assert status == 128 + signal.SIGTERM  # the shell's status for a death by SIGTERM


@pytest.mark.timeout(120)
@needing_mpiexec
def test_a_killed_allreduce_benchmark_takes_its_mpiexec_job_with_it():
    """Its mpiexec jobs run in sessions of their own: a SIGKILLed driver, which runs no
    ``finally``, left mpiexec and both ranks running for the rest of their reps."""
    argv = [sys.executable, str(BENCHMARKS / "allreduce.py"), *ALLREDUCE]
    with job_env(child_env()) as env:
        proc = started(argv, env, lambda lines: sum("--worker" in x for x in lines) >= 3)
        stopped(proc, signal.SIGKILL)
        assert job_left(env, 15) == {}


def test_without_a_parent_death_signal_the_children_start_all_the_same(monkeypatch):
    """Where the kernel has no parent-death signal (not Linux) or ctypes finds no ``prctl``,
    the drivers start their children without one, as the docs say, not with a traceback."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import ctypes

    import harness

    monkeypatch.setattr(sys, "platform", "darwin")
    assert harness.killed_with_this_process() is None
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", lambda *args, **kwargs: object())  # no prctl in it
    assert harness.killed_with_this_process() is None
    monkeypatch.undo()
    if sys.platform.startswith("linux"):  # and where there is one, a child starts with it
        die_with_driver = harness.killed_with_this_process()
        assert die_with_driver is not None
        done = subprocess.run([sys.executable, "-c", ""], preexec_fn=die_with_driver, timeout=30)
        assert done.returncode == 0


#: train_step.py at one case and thread, long enough that its worker is still measuring when
#: the signal comes
TRAIN_STEP = ["--threads", "1", "--rounds", "1", "--repeat", "100000", "--cases", "digits 8x8 b16"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("child", ["worker", "torch check"])
def test_a_killed_drivers_worker_and_torch_check_end_with_it(child, tmp_path):
    """train_step.py's, conv.py's, conv_operator.py's and network_build.py's workers
    (``harness.run_worker``), and the child that tries ``import torch``, had no parent-death
    signal: a driver SIGKILLed, or SIGTERMed by ``kill`` (these drivers have no handler), left
    its worker measuring for minutes, and a hung import for ever, loading the cores."""
    argv = [sys.executable, str(BENCHMARKS / "train_step.py"), *TRAIN_STEP]
    if child == "worker":
        extra, ready = {}, lambda lines: any("--worker" in line for line in lines)
    else:  # a torch whose import hangs, asked about before any worker starts
        hung = fake_torch(tmp_path, "import time\ntime.sleep(600)\n")
        extra = {"PYTHONPATH": child_path(hung)}
        ready = lambda lines: any("import torch" in line for line in lines)  # noqa: E731
    with job_env(child_env(**extra)) as env:
        proc = started(argv, env, ready)
        stopped(proc, signal.SIGKILL)
        assert job_left(env, 10) == {}
