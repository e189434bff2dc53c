"""A second stop signal ends the launcher promptly on a slowly read stderr of its own.

Its last messages (a failure report of 20 long lines) went out through their own queue, and
the end waited for that queue, cut by a stall (a write held 1 s) but not by a second signal:
a reader taking a piece of them every 0.8 s, never a stall, held the launcher up to the whole
drain (5 s; 3.4 s here) after the user's second Ctrl-C. Now what it does not take within
0.2 s is dropped, and where the output takes it, one line says how many messages were not
written (on a line of its own)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from launcher import arrivals, messages, supervisor
from launcher.second_signal import REPEAT_SECONDS
from launcher.shown import shown
from launcher.terminal import Terminal
from tests.launcher.launch_cli import ENV, launcher_command, signal_taken, wait_while_running
from tests.launcher.real_children import GatedOutput, RecordingOutput, wait_until
from tests.processes import job_env, job_left

#: worker 0 fails with 20 long last lines (a long report), once worker 1 notes the launcher's
#: SIGTERM and goes on (the stop waits the grace for it): before it, a loaded host's SIGTERM
#: could reach worker 1 first and end it, and the launcher with it
FAILS_AND_STAYS = """\
import os, signal, sys, time
if os.environ["RANK"] == "0":
    while not os.path.exists("ready"):
        time.sleep(0.01)
    for i in range(20):
        print(f"line {i} " + "x" * 900, flush=True)
    sys.exit(1)
signal.signal(signal.SIGTERM, lambda *_: print("stop asked", flush=True))
open("ready", "w").close()
time.sleep(60)
"""


#: the count line :meth:`Terminal.leave` has the writer say, for a count of messages
LEFT = (
    b"%d message(s) of the launcher not written: its output took them too slowly at a second "
    b"stop signal (a failure report, if any, is in 'failure.json')\n"
)


def _read_slowly(fd: int, got: bytearray, stop: threading.Event) -> None:
    """A slow reader of the launcher's stderr: a page (4 KiB) every 0.8 s, never a stall."""
    while not stop.wait(0.8):
        got.extend(os.read(fd, 4096))


@pytest.mark.timeout(60)
def test_a_second_signal_ends_the_launcher_on_a_slowly_read_stderr(tmp_path: Path):
    (tmp_path / "job.py").write_text(FAILS_AND_STAYS)
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)  # a page: each piece waits on the reader
    got, stop = bytearray(), threading.Event()
    argv = ["local", "--workers", "2", "--servers", "0", "--grace", "30", "--", "job.py"]
    reader = threading.Thread(target=_read_slowly, args=(read, got, stop))
    try:
        with job_env(ENV) as env, open(tmp_path / "out", "wb+") as out:
            launcher = subprocess.Popen(
                [*launcher_command(), *argv], env=env, cwd=tmp_path, stdout=out, stderr=write
            )
            os.close(write)
            write = -1
            reader.start()
            try:
                asked = (tmp_path / "out").read_bytes
                wait_while_running(lambda: b"stop asked" in asked(), launcher, "the stop")
                # Ctrl-C, then another signal once the launcher took it: two pending at once
                signal_taken(launcher, signal.SIGINT)  # are the kernel's to order
                time.sleep(REPEAT_SECONDS + 0.1)  # a second, not the first repeated
                second = time.monotonic()
                launcher.send_signal(signal.SIGTERM)
                status = launcher.wait(timeout=20)
                took = time.monotonic() - second
            finally:
                launcher.kill()
            assert job_left(env, 5) == {}
    finally:
        stop.set()
        if reader.is_alive():
            reader.join(5)
        if write >= 0:
            os.close(write)
    while chunk := os.read(read, 65536):  # what the pipe still holds, to its end
        got.extend(chunk)
    os.close(read)
    assert status == 128 + signal.SIGINT, got  # the first: see the test below
    # was 3.4 s: the report's pieces, one each 0.8 s; now 0.2 s for the output to take the
    # report, 0.2 s for the piece under way and the count line after it. (Whether it ends on a
    # whole line depends on when the reader reads: a piece of the report taken, the count
    # line then waits on a full pipe, and the launcher ends before it; an earlier check of
    # that passed only as the report was dropped unsaid before a piece of it was written.)
    assert took < 1.5, (took, got)
    assert got.endswith(b"\n"), got[-200:]  # the report's pieces end its lines


def test_a_second_signal_inside_the_first_ones_handler_is_the_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Python runs a signal's handler inside another's, at its first call: the SIGTERM sent
    just after a SIGINT (as above) was recorded first where it came during SIGINT's call of
    time.monotonic, and the launcher ended 143, not 130 (a flake of the test above)."""
    sup = supervisor.Supervisor(tmp_path)
    sent: list[int] = []

    def monotonic() -> float:  # the second signal comes as the first one's handler runs
        if not sent:
            sent.append(signal.SIGTERM)
            signal.raise_signal(signal.SIGTERM)
        return time.monotonic()

    monkeypatch.setattr(arrivals, "time", type("Clock", (), {"monotonic": monotonic}))
    previous = {
        s: signal.signal(s, sup._arrivals.on_signal) for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        signal.raise_signal(signal.SIGINT)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert sup._signals == [signal.SIGINT, signal.SIGTERM]


@pytest.mark.timeout(30)
def test_leaving_drops_the_rest_and_says_so_on_a_line_of_its_own():
    out = GatedOutput()
    view = Terminal(out, lambda said: f"{said}\n".encode())
    report = b"r" * 5000 + b"\n"  # two pieces: the first in flight, the second dropped
    assert view.say(report) and view.say(b"after\n")
    wait_until(out.entered.is_set, "the first piece under way")
    assert view.say(b"last\n")  # queued behind the write under way
    assert view.close(0.1, stall_ends=True, stop=lambda: True) is None  # none of a child's
    threading.Timer(0.05, out.gate.set).start()  # the piece in flight ends during leave()
    view.leave(2.0)
    assert out.written == [report[:4096], b"\n" + LEFT % 3]


@pytest.mark.timeout(30)
def test_leaving_a_report_of_many_lines_leaves_the_output_on_a_whole_line():
    """A failure report of many lines was written in pieces of 4 KiB cut mid line, so that
    the launcher, leaving at a second stop signal, ended its stderr within a line where its
    reader was slow (the line saying so left waiting for it). Its pieces end its lines now,
    each whole or not at all on a pipe: the output ends on a whole line."""
    out = GatedOutput()
    view = Terminal(out, lambda said: f"{said}\n".encode())
    lines = [b"%d " % i + b"r" * 900 + b"\n" for i in range(10)]
    assert view.say(b"".join(lines))  # the first piece in flight: its first four lines
    wait_until(out.entered.is_set, "the first piece under way")
    assert view.close(0.1, stall_ends=True, stop=lambda: True) is None
    threading.Timer(0.05, out.gate.set).start()  # the piece in flight ends during leave()
    view.leave(2.0)
    assert out.written == [b"".join(lines[:4]), LEFT % 1]  # was the first 4 KiB, then "\n"


@pytest.mark.timeout(30)
def test_leaving_before_the_writer_took_the_queue_still_says_what_it_dropped():
    """The writer said the count only after a write of its own; where :meth:`Terminal.leave`
    emptied the queue before the writer took it (the messages just queued, the writer not yet
    run: a loaded host, as every second Ctrl-C on a fast stderr once did), the writer
    found the queue empty and ended: the messages gone, unsaid."""
    out = RecordingOutput()
    view = Terminal(out, lambda said: f"{said}\n".encode())
    previous = sys.getswitchinterval()
    sys.setswitchinterval(30)  # the writer runs once this thread waits: in leave()'s join
    try:
        assert view.say(b"stopped\n") and view.say(b"report\n")
        assert view.close(5.0, stall_ends=True, stop=lambda: True) is None
        view.leave(2.0)
    finally:
        sys.setswitchinterval(previous)
    assert out.written == [LEFT % 2]


@pytest.mark.timeout(30)
def test_the_count_of_messages_not_written_holds_those_a_stall_dropped_before():
    """A notice of messages a stall dropped (2 here) counted as one message not written where
    a second signal dropped it in turn: the count said 1, and those 2 went unsaid."""
    out = GatedOutput()
    view = Terminal(out, lambda said: f"{said}\n".encode(), bound=100)
    assert view.say(b"a" * 60 + b"\n")
    wait_until(out.entered.is_set, "the first message under way")
    held = b"b" * 60 + b"\n"  # no room behind the first: dropped at the stall, as is the next
    assert view.say(held) and view.say(held)
    assert view.close(0.1, stall_ends=True, stop=lambda: True) is None  # their notice queued
    threading.Timer(0.05, out.gate.set).start()
    view.leave(2.0)
    assert out.written == [b"a" * 60 + b"\n", LEFT % 2]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("run", ["run", "my run\nx"])
def test_the_count_of_messages_not_written_names_the_failure_reports_file(tmp_path: Path, run: str):
    """The count named ``failure.json`` alone, where the report's path (the run directory's,
    which ``--job-id`` makes) was known to the view: as the stall's notice names it.
    Quoted: a run directory with a line break in its name split the count line in two."""
    out = GatedOutput()
    view = Terminal(out, lambda said: f"{said}\n".encode())
    report = tmp_path / run / "failure.json"
    assert view.say(b"first\n")
    wait_until(out.entered.is_set, "the first message under way")
    assert view.say(b"the report\n", report=report)  # queued behind it: dropped at leave()
    assert view.close(0.1, stall_ends=True, stop=lambda: True) is None
    threading.Timer(0.05, out.gate.set).start()
    view.leave(2.0)
    said = LEFT.replace(b"'failure.json'", shown(report).encode()) % 1
    assert out.written == [b"first\n", said]


@pytest.mark.timeout(30)
def test_a_second_signal_says_the_launchers_messages_not_written_on_a_shared_output(
    tmp_path: Path, monkeypatch
):
    """With its messages on the children's output (``2>&1``) a second signal left the view
    :data:`~launcher.messages.LEFT_SAID_SECONDS` and the launcher ended with its last words
    (the stop, the report) still queued, unsaid, and a child's long line cut where a piece
    ended: as on a stderr of their own, they are dropped and counted on a line of its own.
    """
    monkeypatch.setattr(messages, "LEFT_SAID_SECONDS", 1.0)  # wide of the gate's timer
    out = GatedOutput()
    view = Terminal(out, lambda said: f"{said}\n".encode())
    said = messages.Messages(out, None)
    said.share(view, out, 0.1)
    line = b"w" * 5000 + b"\n"  # two pieces: the first in flight till the gate opens
    assert view.put("worker-0", tmp_path / "worker-0.log", line)
    wait_until(out.entered.is_set, "the child's line under way")
    said.say("stopped by SIGINT")
    assert "1 line(s) of worker-0" in view.close(0.1, stall_ends=True, stop=lambda: True)
    threading.Timer(1.5, out.gate.set).start()  # after the view's 1 s, within leave()'s
    said.end(5.0, stop=lambda: True)
    assert out.written == [line[:4096], b"\n" + LEFT % 1]


@pytest.mark.timeout(30)
def test_a_second_signal_leaves_a_shared_output_that_takes_them_at_once_the_last_words():
    """``test_stopping``'s ``[2>&1]`` check of this (56f12534) raced the writer: the end
    returned before the children's view took the last words just queued, and the launcher
    ended without them (a run in three); here the writer gets no turn but in a wait of the
    end's, so without that wait the words are never written by its return."""
    out = RecordingOutput()  # takes every write at once
    view = Terminal(out, lambda said: f"{said}\n".encode())
    said = messages.Messages(out, None)
    said.share(view, out, 0.1)
    previous = sys.getswitchinterval()
    sys.setswitchinterval(30)  # the writer runs once this thread waits
    try:
        said.say("stopped by SIGINT")
        assert view.close(5.0, stall_ends=True, stop=lambda: True) is None  # gave up at once
        said.end(5.0, stop=lambda: True)
    finally:
        sys.setswitchinterval(previous)
    assert out.written == [b"distconv-launch: stopped by SIGINT\n"]


class SlowOutput(RecordingOutput):
    """An output that takes each write in 0.1 s: slow, never a stall."""

    def hold(self, data: bytes) -> None:
        time.sleep(0.1)


@pytest.mark.timeout(30)
def test_a_first_signal_on_a_slow_stderr_says_how_many_messages_it_dropped(
    monkeypatch: pytest.MonkeyPatch,
):
    """The end's wait for the launcher's messages on a stderr of their own (a first stop
    signal, or none) gave up on an output too slow for it, and the launcher ended with the
    rest queued, unsaid; a second signal said how many it dropped. Now the end says it too.
    """
    monkeypatch.setattr(messages, "LEFT_SAID_SECONDS", 1.0)  # wide of a write's 0.1 s
    out = SlowOutput()
    said = messages.Messages(out, None)
    said.begin()
    sent = [b"m%d " % i + b"x" * 3000 for i in range(20)]  # a write each: 2 s in all
    for message in sent:
        said.say(message.decode())
    said.end(0.5)  # the first signal's end: the wait gives up with most still queued
    written = [line for line in out.written if line.startswith(b"distconv-launch: m")]
    assert 0 < len(written) < len(sent), out.written
    when = LEFT.replace(b" at a second stop signal", b" at the launcher's end")
    assert out.written[-1] == b"distconv-launch: " + when % (len(sent) - len(written))
