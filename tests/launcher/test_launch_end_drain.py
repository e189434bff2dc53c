"""The lines still in a child's pipe at the job's end reach its log, though the launcher's
stdout is read too slowly to take them: the pump, waiting on the output for room in its
queue, was a daemon that ended with the launcher, and what the pipe held reached neither the
log nor the output. The launcher now drains each such pipe to its log before it exits, for a
bounded time, so the log is the whole record."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from launcher.terminal import QUEUE_BYTES
from tests.launcher.attempt_logs import logged
from tests.launcher.launch_cli import ENV, launcher_command, start_unread
from tests.launcher.real_children import stray_holding_the_pipe
from tests.processes import job_env, job_left

#: lines of 100 bytes (111 on the output, behind ``[worker 0] ``): the launcher's queue full,
#: its stdout pipe (64 KiB) too, and 48 KiB more, which the child's pipe (64 KiB) holds without
#: blocking it: it exits
LINES = (QUEUE_BYTES + 64 * 1024) // 111 + 48 * 1024 // 100
#: a worker that prints them, numbered, at once, then its last line, and exits
PRINTS = f"""\
import sys
for i in range({LINES}):
    sys.stdout.write(f"line {{i:08d}} " + "x" * 85 + "\\n")
print("the last line")
"""

#: as many, but 900 KiB more in a pipe of 1 MiB (``F_SETPIPE_SZ``): a pump that drains it takes
#: long enough that the launcher, not waiting, exits first
STRAY_LINES = (QUEUE_BYTES + 64 * 1024) // 111 + 900 * 1024 // 100
STRAY_PRINTS = f"""\
import fcntl
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ
{PRINTS.replace(str(LINES), str(STRAY_LINES))}"""


def _read_slowly(stream, stop: threading.Event) -> None:
    """A reader that takes the launcher's stdout a piece at a time, 4 KiB every 0.5 s: the
    output moves (no stall, so nothing is dropped), but far slower than the child writes."""
    while not stop.is_set() and stream.read1(4096):
        time.sleep(0.5)


def _run_read_slowly(
    tmp_path: Path, program: str, stray: Path | None = None
) -> tuple[int, str, list[bytes]]:
    """The launcher's status, its stderr and worker-0's log's lines for a job of one worker
    running ``program``, its stdout read slowly (:func:`_read_slowly`); ``stray``: the file
    its stray's pid is in (:func:`stray_holding_the_pipe`'s argument), killed at the end."""
    (tmp_path / "prints.py").write_text(program)
    log = tmp_path / "run" / "logs" / "worker-0.log"
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "prints.py"]
    command = launcher_command(OUTPUT_DRAIN_SECONDS=0.5)  # its waits on the output, cut
    stop = threading.Event()
    with job_env(ENV) as env, open(tmp_path / "stderr", "w+") as err:
        args = [] if stray is None else [str(stray)]
        launcher = start_unread([*argv, *args], env, tmp_path, err, command)
        reader = threading.Thread(target=_read_slowly, args=(launcher.stdout, stop))
        reader.start()
        try:
            status = launcher.wait(timeout=30)
        finally:
            stop.set()
            launcher.kill()
            if stray is not None and stray.exists():
                os.kill(int(stray.read_text()), signal.SIGKILL)
            reader.join(5)
            launcher.stdout.close()
        assert job_left(env, 5) == {}
        err.seek(0)
        stderr = err.read()
    return status, stderr.replace(str(log.resolve()), "LOG"), logged(log).splitlines()


@pytest.mark.timeout(60)
def test_the_pipe_at_the_jobs_end_reaches_the_log(tmp_path: Path):
    status, stderr, lines = _run_read_slowly(tmp_path, PRINTS)
    assert status == 0, stderr
    assert (len(lines), lines[-1]) == (LINES + 1, b"the last line"), (len(lines), stderr)
    # what the launcher says of the held output is what holds: the log gets them all
    assert "'LOG' gets them all (drained there at the launcher's end)" in stderr
    assert "was not drained within" not in stderr, stderr


@pytest.mark.timeout(60)
def test_what_the_pipe_holds_at_the_jobs_end_reaches_the_log_though_a_stray_holds_it(
    tmp_path: Path,
):
    """A stray (setsid) holds the child's pipe for good: the drain at the end skipped the pipe,
    which would not end, and the log lacked what the pipe held, the child's last lines, though
    the pump would have read them in a moment. What it holds is drained, not its end."""
    prints = stray_holding_the_pipe("exec(PRINTS); sys.stdout.flush()")  # then exits 3
    program = f"PRINTS = {STRAY_PRINTS!r}\n{prints}"
    status, stderr, lines = _run_read_slowly(tmp_path, program, tmp_path / "stray.pid")
    assert status == 3, stderr
    assert (len(lines), lines[-1]) == (STRAY_LINES + 1, b"the last line"), (len(lines), stderr)
    assert "was not drained within" not in stderr, stderr


def _pumped(data: bytes, stray: bool, last_hold_s: float = 0.0):
    """An :class:`~launcher.long_line.OutputPipe` over a real pipe holding ``data`` (its write
    end kept open, as a stray holds it, where ``stray``), a pump reading it that holds
    ``last_hold_s`` on a last line without its newline (a slow log), and what it took."""
    from launcher.long_line import OutputPipe

    read, write = os.pipe()
    os.write(write, data)
    if not stray:
        os.close(write)
    out, took, at_last = OutputPipe(read), [], threading.Event()

    def pump() -> None:
        for piece in out.pieces():
            took.append(piece)
            if not piece.endswith(b"\n"):
                at_last.set()
                time.sleep(last_hold_s)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return out, thread, took, at_last, (write if stray else None)


def test_a_pump_past_its_pipe_s_end_spends_none_of_the_budget_the_next_child_needs():
    """Two children share the end's 2 s. The first's pump had read its pipe's end and was
    handing on its last line (a slow log): the drain asked it to end a line and waited the
    whole 2 s for an answer it never gives, so the second child, whose pipe a stray holds, was
    given none and its lines were said missing from its log."""
    first = _pumped(b"x\nthe last line, no newline", stray=False, last_hold_s=0.3)
    second = _pumped(b"".join(b"line %d\n" % i for i in range(40)), stray=True)
    try:
        assert first[3].wait(5)
        deadline = time.monotonic() + 2.0
        drained = [c[0].drain(c[1], max(0.0, deadline - time.monotonic())) for c in (first, second)]
        assert drained == [True, True]
        assert len(second[2]) == 40
    finally:
        os.close(second[4])
        second[0].close()
        first[0].close()
        for c in (first, second):
            c[1].join(5)
