"""The real ``distconv-launch`` as a subprocess, in an environment rid of another launcher's
rank variables: what the tests of the launcher's refusals and messages share."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

from tests.child_env import child_path
from tests.processes import job_left, run_job

REPO_ROOT = Path(__file__).resolve().parents[2]
#: the environments tests start launchers with: :data:`ENV`, and the test modules' own
#: (:func:`launcher_env`); ``tests/launcher/conftest.py`` gives each a ``HOME`` of the test's own
LAUNCHER_ENVS: list[dict[str, str]] = []


def launcher_env(env: dict[str, str]) -> dict[str, str]:
    """``env``, an environment a test module starts launchers with, noted in
    :data:`LAUNCHER_ENVS` (its ``HOME`` is then each test's own); returned as it is."""
    LAUNCHER_ENVS.append(env)
    return env


ENV = launcher_env({**os.environ, "PYTHONPATH": child_path()})
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_KEYS", "DISTCONV_PSERVERS"):
    ENV.pop(_name, None)


def launcher_command(module: str = "child", **child_waits: float) -> list[str]:
    """``python -m launcher``, or, given ``child_waits``, the same run with those constants of
    ``launcher.<module>`` (:mod:`launcher.child` unless named) set first
    (``WRAPUP_SECONDS=2.0``): a test of a wait need not wait the product's."""
    if not child_waits:
        return [sys.executable, "-m", "launcher"]
    where = f"launcher.{module}"
    sets = "".join(f"{where}.{name} = {value!r}; " for name, value in child_waits.items())
    run = "runpy.run_module('launcher', run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", f"import runpy, {where}; {sets}{run}"]


def launch(
    *argv: str, cwd: Path, timeout: int = 120, child_waits: dict[str, float] | None = None
) -> subprocess.CompletedProcess:
    """``python -m launcher ARGV`` in ``cwd`` (with :func:`launcher_command`'s ``child_waits``),
    its output captured as text; where it hangs past ``timeout``, it and every process of its
    job are killed (:func:`tests.processes.run_job`)."""
    command = [*launcher_command(**(child_waits or {})), *argv]
    return run_job(command, env=ENV, timeout=timeout, cwd=cwd)


def wait_while_running(
    check: Callable[[], object], launcher: subprocess.Popen, what: str, limit: float = 30
) -> None:
    """Wait until ``check()`` holds, failing the test (naming ``what``) where ``launcher``
    ends first or ``limit`` seconds pass: an event, not a fixed pause."""
    deadline = time.monotonic() + limit
    while not check():
        assert launcher.poll() is None, f"the launcher ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {limit:g} s"
        time.sleep(0.001)


def start_unread(
    argv: Sequence[str],
    env: dict[str, str],
    cwd: Path,
    stderr: object,
    command: list[str] | None = None,
) -> subprocess.Popen:
    """``python -m launcher ARGV`` (``command``: :func:`launcher_command`'s, given waits) in
    ``cwd``, its stdout a pipe the test leaves unread (a stalled output), its stderr
    ``stderr`` (``subprocess.STDOUT``: the same pipe, ``2>&1``)."""
    return subprocess.Popen(
        [*(command or launcher_command()), *argv], env=env, cwd=cwd, stdout=subprocess.PIPE,
        stderr=stderr,
    )  # fmt: skip


def stop_when(
    ready: Callable[[], object], launcher: subprocess.Popen, what: str, limit: float = 20
) -> tuple[int, float]:
    """Once ``ready()`` holds (:func:`wait_while_running`, naming ``what``), SIGTERM
    ``launcher``: its exit status and the seconds it took to end after the signal (20 at
    most); its stdout pipe, if any, closed unread."""
    wait_while_running(ready, launcher, what, limit)
    stopped = time.monotonic()
    launcher.send_signal(signal.SIGTERM)
    status = launcher.wait(timeout=20)
    took = time.monotonic() - stopped
    if launcher.stdout is not None:
        launcher.stdout.close()
    return status, took


def signal_taken(process: subprocess.Popen, signum: int, limit: float = 10) -> None:
    """Send ``process`` ``signum`` and wait (``limit`` seconds at most) until the kernel has
    handed it to one of its threads (pending in none: ``/proc``'s ``SigPnd`` and ``ShdPnd``),
    so that one sent next comes after it: a stop signal, to a launcher whose supervisor took
    them over, is read after it (:mod:`launcher.handler_mask`), and the same signal again is
    a second one, not one merged with it. Two signals pending at once are the kernel's to
    order: it hands the lower-numbered over first, whichever came first."""
    process.send_signal(signum)
    bit, task = 1 << (signum - 1), Path(f"/proc/{process.pid}/task")

    def pending() -> bool:
        masks = []
        for status in task.glob("*/status"):
            try:
                lines = status.read_text().splitlines()
            except OSError:  # a thread that ended
                continue
            masks += [int(line.split()[1], 16) for line in lines if line[3:7] == "Pnd:"]
        return any(mask & bit for mask in masks)

    deadline = time.monotonic() + limit
    while pending():
        assert time.monotonic() < deadline, f"signal {signum} still pending after {limit:g} s"
        time.sleep(0.0001)


def fill_pipe(pipe: int) -> None:
    """Fill the pipe whose write end is ``pipe`` till a byte more would block, through a
    description of its own (O_NONBLOCK on the launcher's would make its writes fail, not
    block)."""
    fill = os.open(f"/proc/self/fd/{pipe}", os.O_WRONLY | os.O_NONBLOCK)
    try:
        for size in (4096, 1):
            while True:
                try:
                    os.write(fill, b"x" * size)
                except BlockingIOError:
                    break
    finally:
        os.close(fill)


@contextmanager
def stalled_pipe() -> Iterator[int]:
    """The write end of a pipe (4 KiB) already full that nobody reads: a launcher's stderr
    stalled from the start (a paused pager on ``2>``); both ends closed at the exit."""
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)  # little to fill
        fill_pipe(write)
        yield write
    finally:
        os.close(write)
        os.close(read)


class SlowReader:
    """A thread that reads a launcher's stdout as ``read(stdout, *args, stop)`` does, till
    ``stop`` (:meth:`end`) or the pipe's end."""

    def __init__(self, launcher: subprocess.Popen, read: Callable[..., None], *args: object):
        self.stop = threading.Event()
        self._thread = threading.Thread(target=read, args=(launcher.stdout, *args, self.stop))
        self._thread.start()

    def end(self) -> None:
        """Stop reading, and wait for the thread (5 s at most)."""
        self.stop.set()
        self._thread.join(5)


@contextmanager
def read_slowly(
    launcher: subprocess.Popen, read: Callable[..., None], *args: object
) -> Iterator[SlowReader]:
    """A :class:`SlowReader` of ``launcher``'s stdout for the block; at its exit, whatever it
    raised, the reader stopped, ``launcher`` killed, the reader ended, its stdout closed."""
    reader = SlowReader(launcher, read, *args)
    try:
        yield reader
    finally:
        reader.stop.set()
        launcher.kill()
        reader.end()
        launcher.stdout.close()


def stderr_once_gone(env: dict[str, str], err: IO[str]) -> str:
    """What the launcher wrote into ``err`` (a file open ``w+``), once nothing of its job
    started in ``env`` (:func:`tests.processes.job_env`) is left."""
    assert job_left(env, 5) == {}
    err.seek(0)
    return err.read()


def read_till_exit(
    read: int, proc: subprocess.Popen, hold: float, timeout: float
) -> tuple[bytes, int]:
    """After ``hold`` seconds, all that the pipe's read end ``read`` gives to its end (the exit
    of ``proc``, its last writer), and ``proc``'s status (waited ``timeout`` seconds at most)."""
    time.sleep(hold)
    got = b""
    while chunk := os.read(read, 65536):
        got += chunk
    return got, proc.wait(timeout=timeout)


def run_python(
    script: str, *argv: str, cwd: Path, text: bool = False
) -> subprocess.CompletedProcess:
    """``python -c SCRIPT ARGV`` in ``cwd`` with :data:`ENV`, its output captured (as text
    where ``text``), 20 s at most: a caller of the launcher as a function."""
    return subprocess.run(
        [sys.executable, "-c", script, *argv], env=ENV, cwd=cwd, capture_output=True,
        timeout=20, text=text,
    )  # fmt: skip


def usage_refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The last stderr line of the launcher's own parser refusing ``argv`` (a usage error,
    exit 2), parsed in this process: a refusal needs no launch."""
    import pytest

    from launcher.cli import build_parser
    from launcher.options import parse_own, split_argv

    own, rest = split_argv(argv)
    with pytest.raises(SystemExit) as stopped:
        parse_own(build_parser(), own, rest)
    assert stopped.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]
