"""A rank that stops because another rank of the job failed, and how it says so.

In a sync parameter-server job a worker that raises says ``bye`` with its error; the shard
then ends the step the other workers wait in with an error reply naming that rank (its
``failed_ranks`` field, ``docs/protocol.md``); a shard stopped on its own SIGTERM while the
workers trained on ends the job naming itself (``stopped_shard``). Those workers raise
:class:`PeerFailed` and ``distconv train`` exits :data:`PEER_FAILED_STATUS`, so a launcher
can tell the victims from
the cause without reading their logs: the victim often exits before the rank that failed has
finished printing its traceback (``docs/operations.md``, Output, logs and failures).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from distconv.placement import from_environment
from distconv.rank_endings import another_job_text, different_jobs_in, setup_failure_in_lines
from distconv.sync.base import SyncError
from distconv.sync.errors import JobRefused

__all__ = ["PEER_FAILED_STATUS", "PeerFailed", "peer_failure", "told_failure", "told_of_in"]

#: ``distconv train``'s exit status when it stopped because another rank failed (a free code:
#: 1 is an error, 2 a usage error, 9 the watchdog, 128 + N a signal; 75 is ``EX_TEMPFAIL``
#: of sysexits.h, "try again": nothing was wrong with this process)
PEER_FAILED_STATUS = 75


class PeerFailed(SyncError):
    """The job ended because of another rank: it raised (its ``bye`` carried the error), or
    it went silent for the shard's ``--timeout``; or because of a shard stopped on its own
    SIGTERM while this worker trained on (a node drain, a rolling restart: the reply's
    ``stopped_shard``). The message is the shard's, naming the cause; either way nothing was
    wrong with this worker, and a restart of the job resumes it.

    Attributes:
        ranks: the ranks whose failure ended the job, as the shard named them (none where a
            shard's stop ended it).
        stopped_shard: the shard whose own stop ended the job, or None.
    """

    def __init__(
        self, message: str, ranks: Sequence[int] = (), stopped_shard: int | None = None
    ) -> None:
        super().__init__(message)
        self.ranks = tuple(ranks)
        self.stopped_shard = stopped_shard

    def __reduce__(self):  # pickles (a thread's error handed over) with its ranks and shard
        return type(self), (str(self), self.ranks, self.stopped_shard)


def failed_peers(field: object, rank: int) -> tuple[int, ...]:
    """The ranks of a reply's ``failed_ranks`` field when they are other ranks than ``rank``:
    a reply that names this rank itself (its own silence) or nothing is no peer's failure."""
    if type(field) is not list:
        return ()
    ranks = tuple(r for r in field if type(r) is int)
    return ranks if ranks and rank not in ranks else ()


def peer_failure(error: BaseException | None) -> PeerFailed | None:
    """``error`` or an exception it was raised from (``raise ... from``) that is a
    :class:`PeerFailed`; None when none is."""
    seen = 0
    while error is not None and seen < 16:
        if isinstance(error, PeerFailed):
            return error
        error, seen = error.__cause__, seen + 1
    return None


#: the lead of a shard's error reply, as the worker words it (``rank 1, hello: pserver
#: HOST:PORT: ``): the rank that asked, this worker's own
_ASKED = re.compile(r"rank (\d+), \S+(?: \d+)?: pserver")
#: the words a shard refuses a rank's second hello with, unlike its first: always about the
#: refused rank's own two hellos, never another's failure (``another_job_text``'s, rank left off)
_ANOTHER_JOB = re.compile(rf"rank \d+ {re.escape(another_job_text(0, '').removeprefix('rank 0 '))}")


def told_of_in(text: str) -> int | None:
    """The rank whose failure a shard's refusal of the job (``text``, as the worker words it)
    only tells of: that rank could not set up (``fail_setup``; its words as
    :func:`~distconv.rank_endings.setup_failure_in_lines` reads them), which
    :func:`~distconv.sync.ps.reply_errors.shard_error` marks its ``JobRefused`` with
    (:attr:`~distconv.sync.errors.JobRefused.told_of`); None for any other refusal, a shard's
    of a rank's second hello unlike its first ("runs another job than its first hello")
    included, which names one rank's own two hellos, never another's failure."""
    if (said := different_jobs_in([text])) is not None and _ANOTHER_JOB.match(said):
        return None
    found = setup_failure_in_lines([text])
    return None if found is None else found[0]


def told_failure(
    error: BaseException, rank: int | None = None, env: Mapping[str, str] | None = None
) -> bool:
    """Whether ``error`` is a parameter-server worker's refusal that only tells of another
    rank's failure: that rank could not set up (``fail_setup``), as distconv's job check or a
    shard's refusal marked it (:attr:`~distconv.sync.errors.JobRefused.told_of`; not the
    error's words: a script's own ``JobRefused("rank 3 could not set up: ...")`` is its own
    failure). Such a worker is its victim, as on a :class:`~distconv.sync.peers.PeerFailed`:
    it exits :data:`~distconv.sync.peers.PEER_FAILED_STATUS`, so that ``distconv-launch``
    blames the rank that failed where this one exits first. Not MPI's refusals
    (``raised_alike``): the ranks of one ``mpiexec`` are one child to the launcher, whose
    status is the first ``MPI_Abort``'s under mpi4py's runner, where a 75 would stand for the
    failing rank's 1.

    Not where the failure named is this worker's own (``rank``; where None, the rank a
    shard's reply names as the one that asked, else the environment's, ``env`` or
    ``os.environ``): the failing rank, set up again, must not exit as its own victim. Nor a
    shard's refusal of a rank's second hello unlike its first, never marked
    (:func:`told_of_in`)."""
    if not isinstance(error, JobRefused) or error.raised_alike:
        return False
    told = getattr(error, "told_of", None)  # a subclass that skipped JobRefused's __init__
    if told is None:
        return False
    own = rank if rank is not None else _own_rank(str(error), os.environ if env is None else env)
    return told != own


def _own_rank(text: str, env: Mapping[str, str]) -> int | None:
    """This worker's rank: the one a shard's reply ``text`` leads with, else the environment's
    (the launcher's ``RANK``); None where neither says (a malformed environment included)."""
    if (asked := _ASKED.match(text)) is not None:
        return int(asked[1])
    try:
        placement = from_environment(env, None)
    except ValueError:  # RuntimeConfigError: no rank to read, said elsewhere
        return None
    return None if placement is None else placement.rank
