"""Which replies the intake marks as a stray for :meth:`ReplyIntake._bytes_heard`.

05fc911 stopped marking a late reply to a request this worker gave up, of the shard it was
sent to, as a reply to nothing awaited: its bytes are a live shard's, and a retry's wait must
not fall back to its own start when it is read. Its test (``test_late_reply_heard.py``) needs
the retry's answer to come more than :data:`STRAY_SLACK` after the late reply, which a loaded
machine does not always give: there it passed with the fix reverted. These cases call the
intake's own code directly, so they fail whenever the rule is broken.
"""

from __future__ import annotations

import logging
import time

import pytest

from distconv.sync.ps.intake import ReplyIntake


class Intake(ReplyIntake):
    """The reply tables of one worker (rank 0) with two shards, nothing else."""

    def __init__(self) -> None:
        self.rank = 0
        self.endpoints = ["h:1", "h:2"]
        self._replies: dict = {}
        self._rid_shard: dict = {}
        self._rid_bytes: dict = {}
        self._replies_dropped: dict = {}
        self._strays: dict = {}
        self._stray_at: dict = {}

    def _named(self, shards, asked=""):
        return ", ".join(f"{s} ({self.endpoints[s]})" for s in shards)


def _heard_now(intake: Intake, shard: int) -> bool:
    """Whether bytes of ``shard``'s link read right now count as a sign of life."""
    now = time.monotonic()
    return intake._bytes_heard(shard, now, otherwise=-1.0) == now


@pytest.mark.timeout(10)
def test_a_late_reply_to_a_request_given_up_is_dropped_and_its_bytes_count(caplog):
    intake = Intake()
    intake._rid_shard[5] = 0
    intake._drop_replies({5})  # a pull given up: its reply is still to come
    with caplog.at_level(logging.WARNING, logger="distconv.pserver"):
        intake._take(0, {"id": 5, "op": "ok"}, [])
    assert not intake._replies_dropped and not intake._replies
    assert not caplog.records  # no ignored reply: a request of this worker, of that shard
    assert _heard_now(intake, 0)  # a retry's wait is not given up when it is read


@pytest.mark.timeout(10)
def test_a_reply_with_the_id_of_another_shards_request_given_up_is_a_stray(caplog):
    intake = Intake()
    intake._rid_shard[5] = 1
    intake._drop_replies({5})  # given up on shard 1, answered by shard 0
    with caplog.at_level(logging.WARNING, logger="distconv.pserver"):
        intake._take(0, {"id": 5, "op": "ok"}, [])
    assert intake._replies_dropped == {5: 1}  # shard 1's late reply is still to come
    assert "ignored a reply of pserver shard 0" in caplog.text
    assert not _heard_now(intake, 0)
    assert _heard_now(intake, 1)


@pytest.mark.timeout(10)
def test_a_second_late_reply_to_one_request_given_up_is_a_stray():
    intake = Intake()
    intake._rid_shard[5] = 0
    intake._drop_replies({5})
    intake._take(0, {"id": 5, "op": "ok"}, [])
    intake._take(0, {"id": 5, "op": "ok"}, [])  # one per request: a duplicate is no answer
    assert not _heard_now(intake, 0)
