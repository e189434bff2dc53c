"""What the launcher's tests of real children share: a real ``mpiexec`` (or a skip), a
:class:`~launcher.child.Child` run to its end, the lines it gave the launcher's output, a wait
for what it does, a log write of its that does not end, and the launcher's waits for its pump's
answer (:meth:`~launcher.long_line.OutputPipe.end_line`) counted."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import launcher.pump
from launcher.child import Child, ChildSpec
from launcher.long_line import OutputPipe


class RecordingOutput:
    """A stand-in for the launcher's output that keeps what is written to it; a test's
    subclass makes a write slow or stall in :meth:`hold`, called before each is kept."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def hold(self, data: bytes) -> None:
        """Called with each write before it is kept: returns at once here."""

    def write(self, data: bytes) -> int:
        self.hold(data)
        self.written.append(data)
        return len(data)

    def flush(self) -> None:
        pass


class GatedOutput(RecordingOutput):
    """An output whose first write waits for :attr:`gate` (up to 10 s): a slow reader's
    piece in flight, slow and not gone; :attr:`entered` is set once that write is under way."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.entered = threading.Event(), threading.Event()

    def hold(self, data: bytes) -> None:
        if not self.entered.is_set():
            self.entered.set()
            self.gate.wait(10)


def mpiexec_or_skip() -> str:
    """The ``mpiexec`` on PATH; skips the test where there is none, or mpi4py is missing."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec is not on PATH")
    pytest.importorskip("mpi4py")
    return mpiexec


#: the file in ``tmp_path`` that :func:`run_to_exit` gives the launcher's output to
OUTPUT_NAME = "out"


def run_to_exit(tmp_path: Path, spec: ChildSpec, log_name: str | None = None) -> Child:
    """``spec`` run as a real child, its output to :data:`OUTPUT_NAME` in ``tmp_path`` and its
    log ``log_name`` there (default ``<name>.log``), waited for (10 s at most) and finished."""
    with open(tmp_path / OUTPUT_NAME, "wb") as out:
        child = Child(spec, tmp_path / (log_name or f"{spec.name}.log"), out, threading.Lock())
        wait_until(lambda: child.poll() is not None, "the child did not exit")
        child.finish()
    return child


def wait_until(condition: Callable[[], object], what: str, seconds: float = 10) -> None:
    """Wait until ``condition()`` holds, failing the test with ``what`` after ``seconds``: an
    event, not a fixed pause."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@contextmanager
def log_write_hung(monkeypatch: pytest.MonkeyPatch, starting: bytes) -> Iterator[None]:
    """Within the block, the pump's write to the child's log (:func:`launcher.pump.log_line`)
    of a line that begins with ``starting`` does not end, as on a hung network file system; it
    ends, the line logged, as the block is left (a block still running after 10 s fails the
    test: the launcher waited for the write)."""
    let_go, log_line = threading.Event(), launcher.pump.log_line

    def hung_log_line(log, line, *args):
        if line.startswith(starting):
            assert let_go.wait(10), "the launcher waited for a hung log write"
        return log_line(log, line, *args)

    monkeypatch.setattr(launcher.pump, "log_line", hung_log_line)
    try:
        yield
    finally:
        let_go.set()


def after_unanswered_waits(monkeypatch: pytest.MonkeyPatch, count: int) -> threading.Event:
    """An event set once ``count`` of the launcher's waits for its pumps' answers to
    :meth:`~launcher.long_line.OutputPipe.end_line` have ended without one: a test holds a
    pump up until it is set, as a host that runs the pump late would."""
    unanswered, init = threading.Event(), OutputPipe.__init__
    timed_out: list[bool] = []

    class Answered(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            answered = super().wait(timeout)
            timed_out.append(not answered)
            if sum(timed_out) >= count:
                unanswered.set()
            return answered

    def counting_init(self: OutputPipe, fd: int) -> None:
        init(self, fd)
        self._ended = Answered()

    monkeypatch.setattr(OutputPipe, "__init__", counting_init)
    return unanswered


def reading_after_unanswered_waits(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """The pump reads nothing of its pipe until ``count`` of the launcher's waits for its
    answer to :meth:`~launcher.long_line.OutputPipe.end_line` ended without one
    (:func:`after_unanswered_waits`): a pump that began reading and that a loaded host then
    did not run; it reads the pipe, and writes what it holds, during the launcher's waits."""
    run, read = after_unanswered_waits(monkeypatch, count), OutputPipe._read

    def starved_read(self: OutputPipe) -> bytes | None:
        assert run.wait(10), "the launcher did not ask the pump for the line under way"
        return read(self)

    monkeypatch.setattr(OutputPipe, "_read", starved_read)


def output_lines(
    tmp_path: Path, spec: ChildSpec, log_name: str | None = None
) -> tuple[list[bytes], Child]:
    """``spec`` run to its end (:func:`run_to_exit`, its log ``log_name`` in ``tmp_path``):
    the lines of the launcher's output it gave, without their newlines, and the child."""
    child = run_to_exit(tmp_path, spec, log_name)
    return (tmp_path / OUTPUT_NAME).read_bytes().splitlines(), child


def stray_holding_the_pipe(then: str) -> str:
    """A child's ``python -c`` program: a stray leaves the child's group holding its pipe (its
    pid in the file ``sys.argv[1]``, for the test to end it) and sleeps 20 s; once the pid is
    there, the child runs the statement ``then`` (its output) and dies with status 3."""
    return f"""if True:
    import os, sys, time
    pid_file = sys.argv[1]
    if os.fork() == 0:
        os.setsid()
        with open(pid_file + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pid_file + ".tmp", pid_file)
        time.sleep(20)
        os._exit(0)
    deadline = time.monotonic() + 10
    while not os.path.exists(pid_file) and time.monotonic() < deadline:
        time.sleep(0.01)
    {then}
    os._exit(3)
"""


def stray_for_a_while(hold: float, output: bytes) -> str:
    """A child's ``python -c`` program: a stray leaves the child's group holding its pipe for
    ``hold`` seconds; once it is out of the group, the child writes ``output`` and dies with
    status 3."""
    return f"""if True:
    import os, time
    stray = os.fork()
    if stray == 0:
        os.setsid()
        time.sleep({hold})
        os._exit(0)
    while os.getsid(stray) == os.getsid(0):  # not yet out of the group
        time.sleep(0.001)
    os.write(1, {output!r})
    os._exit(3)
"""
