"""A launcher message after the end of its messages' queue (:meth:`Messages.end`) goes
straight to stderr, and once was a blocking write there: where the output stalled by then (a
pipe that the job's last lines filled, a pager paused on them) the launcher blocked for good.
Now it is written within :data:`~launcher.messages.STRAIGHT_SECONDS`, and once one is left
stalled every later one is dropped at once: one thread held at most."""

from __future__ import annotations

import threading
import time

import pytest

from launcher import messages
from launcher.messages import Messages
from tests.launcher.launch_cli import stalled_pipe
from tests.launcher.real_children import GatedOutput, wait_until


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


#: the count :meth:`Messages.end` has the output say of the messages it dropped
LEFT_AT_THE_END = (
    b"distconv-launch: %d message(s) of the launcher not written: its output took them too "
    b"slowly at the launcher's end (a failure report, if any, is in 'failure.json')\n"
)


@pytest.mark.timeout(30)
def test_a_second_end_neither_waits_again_nor_loses_the_count():
    """:meth:`Messages.end` ran twice, at :meth:`Supervisor.run`'s end and again in its
    ``unclaim()``: on an output that stays slow, the second waited as long again (the written
    messages, then leave()'s count: 0.4 s), and its leave() counted the messages dropped anew,
    from the queue the first had emptied: none, so the count line never came."""
    out = GatedOutput()
    said = Messages(out, None)
    said.begin()
    said.say("m0")
    wait_until(out.entered.is_set, "the first message under way")  # held there till the gate
    for i in (1, 2, 3):
        said.say(f"m{i}")  # queued behind it
    said.end(0.1)  # gives up on the output: the three queued dropped, their count to say
    began = time.monotonic()
    said.end(0.1)  # unclaim()'s, once run() ended them
    took = time.monotonic() - began
    out.gate.set()  # the reader goes on: the message in flight, then the count
    wait_until(lambda: len(out.written) == 2, "the count line", 2)
    assert out.written == [b"distconv-launch: m0\n", LEFT_AT_THE_END % 3]
    assert took < 0.1, took  # was 0.4 s (LEFT_SAID_SECONDS twice)


def test_a_message_on_a_closed_stderr_is_dropped(tmp_path):
    """A message written straight on a stderr that is closed (the launcher called as a
    function by a program that closed its own) raised the file's ValueError out of say(),
    from the middle of a stop, say: say() drops a message its stderr cannot take."""
    with open(tmp_path / "err", "wb") as err:
        said = Messages(err, None)
    said.say("before the queue")  # no descriptor: written on the file object, which is closed
    said.begin()
    said.end(1.0)  # the queue's writer gave up on it (gone): each message now goes straight
    said.say("after the end")
    assert (tmp_path / "err").read_bytes() == b""
