"""The launcher's own messages through :class:`launcher.terminal.Terminal` where its stderr is
its stdout's file: on a stalled output they are dropped at once and counted, never
blocking the supervisor, and said once it moves; they are in order with the children's lines."""

from __future__ import annotations

import io
import json
import os
import sys
import time
from pathlib import Path

import pytest

from launcher.child_spec import ChildSpec
from launcher.messages import Messages, same_file
from launcher.supervisor import Supervisor
from launcher.terminal import Terminal
from tests.launcher.real_children import wait_until
from tests.launcher.test_terminal import BOUND, _notice, _pipe, _read_all


@pytest.mark.timeout(30)
def test_a_message_on_a_stalled_output_is_dropped_counted_and_said(tmp_path: Path):
    log = tmp_path / "worker-0.log"
    with _pipe() as (read, out):
        view = Terminal(out, _notice, bound=BOUND)
        messages = Messages(out, None)
        messages.share(view, out, 10)  # one file: through the queue
        line = json.dumps({"source": "worker-0", "pad": "x" * 80}).encode() + b"\n"
        for _ in range(2 * BOUND // len(line)):  # the queue full, the pipe too: a stall
            assert view.put("worker-0", log, line)
        said = time.monotonic()
        messages.say("worker 0 failed: " + "x" * len(line))  # longer than any room left
        assert time.monotonic() - said < 1.5
        got: list[bytes] = []
        reader = _read_all(read, got)  # the output moves again
        wait_until(lambda: view.pending() == 0, "the queue written")
        messages.say("stopped")
        unshown = view.close(10)
        out.close()
        reader.join(10)
    assert unshown is None
    text = b"".join(got).decode().splitlines()
    notice = json.loads(text[-3])["message"]
    assert notice == "1 message(s) of the launcher not shown: its output was stalled", text[-3:]
    assert text[-2] == "distconv-launch: stopped"  # the dropped child lines, said at the close
    assert "line(s) of worker-0 not shown" in text[-1] and "worker 0 failed" not in str(text)


def test_same_file_tells_stdout_shared_with_stderr(tmp_path: Path):
    read, write = os.pipe()
    with os.fdopen(write, "wb") as one, os.fdopen(os.dup(write), "wb") as two:
        with open(tmp_path / "f", "wb") as other:
            assert same_file(one, two) and not same_file(one, other)
    os.close(read)
    buffer = io.BytesIO()
    assert same_file(buffer, buffer) and not same_file(buffer, io.BytesIO())


class _BrokenOutput:
    """An output whose write fails as no OS error does (a bug, a stream's own error)."""

    def write(self, data: bytes) -> int:
        raise RuntimeError("a bug in the stream")

    def flush(self) -> None:
        pass


@pytest.mark.timeout(30)
def test_a_writer_killed_otherwise_than_by_an_os_error_is_said_and_ends_the_view(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
):
    """It ended the writer thread with a traceback, and put() went on queueing, each line
    waiting out a stall, for a view nothing wrote: now one line says it, and the view ends."""
    said: list[str] = []
    view = Terminal(_BrokenOutput(), _notice, failed=said.append)
    log = tmp_path / "logs" / "worker-0.log"
    assert view.put("worker-0", log, b"a line\n")
    wait_until(lambda: said, "the failure said")
    assert said == [
        "cannot write the launcher's output: RuntimeError: a bug in the stream; the children's "
        f"lines from now on are in their logs alone ('{log.parent}')"
    ]
    started = time.monotonic()
    assert not view.put("worker-0", log, b"another\n") and not view.say(b"a message\n")
    assert view.close(10) is None and time.monotonic() - started < 1
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.timeout(30)
def test_a_launcher_whose_writer_is_killed_ends_its_job_saying_so(tmp_path: Path):
    spec = ChildSpec("worker", 0, [sys.executable, "-c", "print('a line')"])
    with (tmp_path / "err").open("wb") as err:
        status = Supervisor(tmp_path / "run", out=_BrokenOutput(), err=err).run(lambda _r: [spec])
    said = (tmp_path / "err").read_text()
    assert status == 0, said
    assert said.count("RuntimeError: a bug in the stream") == 1, said
    assert (tmp_path / "run" / "logs" / "worker-0.log").read_text() == "a line\n"


@pytest.mark.timeout(30)
def test_a_dropped_failure_report_is_named_in_the_drop_notice(tmp_path: Path):
    """The notice of the launcher's dropped messages said only their count: a failure report
    among them read as lost. Now it names the file that has it."""
    report = tmp_path / "run" / "failure.json"
    with _pipe() as (read, out):
        view = Terminal(out, _notice, bound=BOUND)
        messages = Messages(out, None)
        messages.share(view, out, 10)
        line = b"x" * 80 + b"\n"
        for _ in range(2 * BOUND // len(line)):  # the queue full, the pipe too: a stall
            assert view.put("worker-0", tmp_path / "worker-0.log", line)
        messages.say("worker 0 failed: " + "x" * BOUND, level="error", report=report)
        got: list[bytes] = []
        reader = _read_all(read, got)  # the output moves again
        wait_until(lambda: view.pending() == 0, "the queue written")
        messages.say("stopped")
        view.close(10)
        out.close()
        reader.join(10)
    text = b"".join(got).decode()
    notice = "1 message(s) of the launcher not shown: its output was stalled; the failure "
    assert f"{notice}report among them is in '{report}'" in text, text[-400:]
