"""What a shard's error reply to a job check raises in a worker, read where the reply's other
fields are (:func:`distconv.sync.ps.reply_errors.late_reply_error`): a reply naming ranks late to
the check (``late`` beside ``failed_ranks``) is a :class:`RanksLate`, which the job check waits
out; the same reply without ``late``, or naming a stopped shard, stays the failure it names."""

from __future__ import annotations

from distconv.sync.errors import JobRefused
from distconv.sync.peers import PeerFailed
from distconv.sync.ps.job_hello import REFUSED_JOB
from distconv.sync.ps.late_ranks import LATE_FIELD, RanksLate
from distconv.sync.ps.reply_errors import late_reply_error

SAID = "rank 0, hello: pserver x: ranks 1 late to the job check"


def test_late_ranks_beside_failed_ranks_are_waited_for():
    error = late_reply_error(SAID, {"failed_ranks": [1], LATE_FIELD: [1]}, 0)
    assert type(error) is RanksLate and error.ranks == (1,) and str(error) == SAID


def test_without_the_late_field_the_ranks_failed():
    for late in (None, "1", 1):  # absent, or not a list: an older or another service
        header = {"failed_ranks": [1], **({} if late is None else {LATE_FIELD: late})}
        error = late_reply_error(SAID, header, 0)
        assert type(error) is PeerFailed and error.ranks == (1,)


def test_a_stopped_shard_is_no_late_rank():
    header = {"failed_ranks": [1], LATE_FIELD: [1], "stopped_shard": 0}
    error = late_reply_error(SAID, header, 0)
    assert type(error) is PeerFailed and error.stopped_shard == 0


def test_a_reply_naming_this_rank_or_a_refusal_stays_its_own_error():
    own = late_reply_error(SAID, {"failed_ranks": [0], LATE_FIELD: [0]}, 0)
    assert not isinstance(own, PeerFailed)
    refused = late_reply_error(SAID, {**REFUSED_JOB, LATE_FIELD: [1]}, 0)
    assert type(refused) is JobRefused
