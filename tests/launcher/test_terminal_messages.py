"""The launcher's own messages through :class:`launcher.terminal.Terminal` where its stderr is
its stdout's file (k444): on a stalled output they are dropped at once and counted, never
blocking the supervisor, and said once it moves; they are in order with the children's lines."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

from launcher.messages import Messages, same_file
from launcher.terminal import Terminal
from tests.launcher.real_children import wait_until
from tests.launcher.test_terminal import BOUND, _notice, _pipe, _read_all


@pytest.mark.timeout(30)
def test_a_message_on_a_stalled_output_is_dropped_counted_and_said(tmp_path: Path):
    log = tmp_path / "worker-0.log"
    with _pipe() as (read, out):
        view = Terminal(out, _notice, bound=BOUND)
        messages = Messages(out, None)
        messages.share(view, out)  # one file: through the queue
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
