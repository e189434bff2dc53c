"""A launcher message after the end of its messages' queue (:meth:`Messages.end`) goes
straight to stderr, and once was a blocking write there: where the output stalled by then (a
pipe that the job's last lines filled, a pager paused on them) the launcher blocked for good.
Now it is written within :data:`~launcher.messages.STRAIGHT_SECONDS`, and once one is left
stalled every later one is dropped at once: one thread held at most (k526)."""

from __future__ import annotations

import threading
import time

import pytest

from launcher import messages
from launcher.messages import Messages
from tests.launcher.launch_cli import stalled_pipe


@pytest.mark.timeout(30)
def test_messages_after_the_end_on_a_stalled_stderr_neither_block_nor_pile_up(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(messages, "STRAIGHT_SECONDS", 0.2)
    with stalled_pipe() as write, open(write, "wb", buffering=0, closefd=False) as err:
        said = Messages(err, None)
        said.begin()
        said.end(1.0)  # nothing queued: its writer done, a message now goes straight
        threads = threading.active_count()
        speaker = threading.Thread(target=lambda: [said.say(f"late {i}") for i in range(50)])
        began = time.monotonic()
        speaker.start()
        speaker.join(5)
        took = time.monotonic() - began
        assert not speaker.is_alive(), "a message after the end blocked on a stalled stderr"
        assert took < 1.0, took  # one write waited for, the 49 after it dropped at once
        assert threading.active_count() <= threads + 1  # the one stalled write's thread
    # the pipe closed: the stalled write ends (EPIPE), its thread with it
