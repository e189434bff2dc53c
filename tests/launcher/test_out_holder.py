"""Whose process holds an ``--out`` a rank was refused as in use (:mod:`launcher.out_holder`):
this launch's own (restarted: it may let go) or another job's (the job ends unrestarted), read
from the refusal's own words (``distconv.run_holder.in_use_refusal``) with real processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from distconv.refused_starts import start_refused_in
from launcher.out_holder import held_by_another_job

HOST = socket.gethostname()


def _refusal(pid: int, host: str = HOST, job: str | None = None) -> str:
    """A rank's last line for ``runs/x`` held by ``pid`` on ``host`` (its claim's ``job``)."""
    of_job = f" (job {job})" if job else ""
    return (
        f"distconv train: error: runs/x is in use by pid {pid} on {host}{of_job}: that run is "
        "still going; wait for it to end (or stop it) to go on with this run, or choose another "
        "--out"
    )


@pytest.fixture
def below() -> Iterator[int]:
    """The pid of a live process below this one (a launcher's child)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


#: ``python -c ORPHAN``: starts a sleeper in a session of its own, says its pid and ends, so
#: the sleeper is init's (or a subreaper's): no process below the test, as an MPI rank of an
#: attempt before is none below the launcher once its ``mpiexec`` ended
ORPHAN = (
    "import subprocess, sys; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], "
    "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
    "print(p.pid)"
)


@pytest.fixture
def orphan_of_launch() -> Iterator[int]:
    """The pid of a live process, no descendant of this one, started with
    ``DISTCONV_LAUNCH=tok-b`` in its environment."""
    env = {**os.environ, "DISTCONV_LAUNCH": "tok-b"}
    said = subprocess.run(
        [sys.executable, "-c", ORPHAN], env=env, capture_output=True, text=True, timeout=30
    )
    pid = int(said.stdout)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)


def test_an_orphaned_process_of_this_launch_is_its_own_though_the_claim_names_another_job(
    orphan_of_launch,
):
    # a run begun by job a, resumed by launch tok-b of job b: its rank of the attempt before,
    # still holding the lock, is this launch's, and the refusal is restarted
    refusal = _refusal(orphan_of_launch, job="a")
    assert held_by_another_job([refusal], "b", "tok-b") is None
    assert held_by_another_job([refusal], "b", "tok-c") is not None  # another launch's


def test_another_process_s_hold_ends_the_job_as_every_attempt_would_meet_it():
    # pid 1, init: alive on this host, and no process of this launch
    cause = held_by_another_job([_refusal(1), ""], "launch-a")
    assert cause == (
        f"its output directory is in use by pid 1 on {HOST}, no process of this launch: "
        "another job's run is going there"
    )
    assert start_refused_in([_refusal(1), cause]) == (
        "the output directory is in use by another job's run"
    )


def test_a_hold_whose_claim_names_another_job_is_another_job_s():
    cause = held_by_another_job([_refusal(1, job="sweep-3")], "launch-a")
    assert cause is not None and f"pid 1 on {HOST} (job sweep-3), no process" in cause


def test_a_process_below_the_launcher_is_its_own(below):
    assert held_by_another_job([_refusal(below)], "launch-a") is None


def test_a_claim_naming_this_launch_s_job_is_its_own_on_any_host():
    assert held_by_another_job([_refusal(1, host="node-7", job="launch-a")], "launch-a") is None


def test_a_line_that_names_no_hold_is_left_as_it_was():
    assert held_by_another_job(["distconv train: error: something else"], "launch-a") is None
    assert start_refused_in([_refusal(1)]) is None  # the rank's words alone: restartable still
