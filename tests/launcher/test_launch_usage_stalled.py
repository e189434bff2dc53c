"""argparse's usage error on a stderr that stalls (a paused pager on ``2>``, a reader that died
without closing it), written within a bound (:class:`launcher.stderr_line.BoundedParser`).

A SIGTERM that came while it was being written was kept (the launcher's stop signals are
not armed yet) and then dropped: the launcher waited the write's whole bound and exited 2, as
if nothing had stopped it. It now ends at once with 128 + the signal, as a stop signal at any
other moment before the job started.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.launcher.launch_cli import (
    ENV,
    launcher_command,
    read_till_exit,
    stalled_pipe,
    wait_while_running,
)
from tests.processes import job_env, job_left

#: a usage error of the launcher's own (argparse's: usage, then the ``error:`` line)
BOGUS = ["local", "--bogus", "--", "worker.py"]


def writing_to_a_pipe(pid: int) -> bool:
    """Whether a thread of process ``pid`` is blocked in a write to a pipe (its ``wchan``)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        return any("pipe_write" in Path(f"/proc/{pid}/task/{t}/wchan").read_text() for t in tasks)
    except OSError:  # it or a thread ended meanwhile
        return False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_stop_signal_during_a_usage_error_on_a_stalled_stderr_ends_with_it(
    tmp_path: Path, signum: int
):
    with job_env(ENV) as env, stalled_pipe() as write:
        launcher = subprocess.Popen(
            [*launcher_command(), *BOGUS], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
            stderr=write,
        )  # fmt: skip
        try:
            wait_while_running(lambda: writing_to_a_pipe(launcher.pid), launcher, "the usage")
            sent = time.monotonic()
            launcher.send_signal(signum)
            status = launcher.wait(timeout=15)
            took = time.monotonic() - sent
        finally:
            launcher.kill()
        assert job_left(env, 5) == {}
    # the write given up at the signal, not after its bound (1 s, then the error line's)
    assert (status, took < 0.8) == (128 + signum, True), (status, took)


@pytest.fixture
def usage_and_error(tmp_path: Path) -> tuple[bytes, bytes]:
    """The launcher's usage and its ``error:`` line for :data:`BOGUS`, on a stderr that reads."""
    done = subprocess.run(
        [*launcher_command(), *BOGUS], env=ENV, cwd=tmp_path, capture_output=True, timeout=60
    )
    usage, error = done.stderr.rstrip(b"\n").rsplit(b"\n", 1)
    assert b"error:" in error and b"usage:" in usage, done.stderr
    return usage + b"\n", error + b"\n"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hold", [0.4, 1.5], ids=["read-during-the-write", "read-after-its-bound"])
def test_a_stalled_stderr_gets_the_usage_before_its_error_line(
    tmp_path: Path, usage_and_error: tuple[bytes, bytes], hold: float
):
    """The usage and the ``error:`` line were two bounded writes, each a thread's; on a
    stalled stderr the second began while the first still waited, and whichever the pipe took
    first came first. Here the pipe (one page) has room for the error line alone, so the
    kernel appends it to the full page while the usage waits for a page of its own: the error
    came out first, its usage after it or (the first write given up) never. ``hold``: seconds
    the pipe stays stalled once the launcher writes, then it is read to its end."""
    usage, error = usage_and_error
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
        filler = b"x" * (4096 - len(error) - 1)  # room for the error line, not the usage
        os.write(write, filler)
        with job_env(ENV) as env:
            launcher = subprocess.Popen(
                [*launcher_command(), *BOGUS], env=env, cwd=tmp_path,
                stdout=subprocess.DEVNULL, stderr=write,
            )  # fmt: skip
            os.close(write)
            write = -1
            try:
                wait_while_running(lambda: writing_to_a_pipe(launcher.pid), launcher, "the usage")
                got, status = read_till_exit(read, launcher, hold, 15)
            finally:
                launcher.kill()
            assert job_left(env, 5) == {}
    finally:
        os.close(read)
        if write != -1:
            os.close(write)
    assert status == 2
    said = got[len(filler) :]
    assert said in (b"", usage + error), said  # whole and in argparse's order, or nothing
