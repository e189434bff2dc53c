"""Whom a failed child's last lines, or its peers', name as the failure's cause, where its
status cannot say it: a rank that could not set up (``rank 0 could not set up: ...``, which the
ranks told of it say), and a rank that a parameter server shard named as keeping it waiting past
its ``--timeout`` (``rank 1 (host vm, last step 184) sent nothing for step 185 ... within 10
s``, ``... silent for 10 s``: a straggler, stopped or stuck, which may never exit by itself);
and the shard that a worker gave up on (``rank 0: no answer to step 46 from pserver shard(s) 0
(...) within 1.5 s``: :func:`unanswered_shard`), which may never exit either.

The worker that stopped because of it (a victim, exit 75) is often the only child that exits
within the launcher's ``--settle``; :func:`told_rank` reads the rank its lines name, so that
:func:`launcher.settle.blamed` blames that worker instead, and :func:`told` reads the words that
become its :attr:`~launcher.failure.Failure.cause`. The words are :mod:`distconv.rank_endings`'s
and :mod:`distconv.straggler_words`'s, which the ranks and the shards write them with.
"""

from __future__ import annotations

from collections.abc import Sequence

from distconv.rank_endings import setup_failure_in_lines, setup_failure_said_in_lines
from distconv.straggler_words import silent_ranks_in, unanswering_shards_in

from .rank_reason import rank_text


def said_lines(tail: Sequence[str]) -> list[str]:
    """Each line of ``tail`` as its rank wrote it: MPI's tag of the rank taken off, and a JSON
    log's error line read for its ``message`` (whole, it ended the cause in the object's
    other fields: ``...8 there","logger":"distconv",...}``)."""
    return [rank_text(line)[1] for line in tail]


def setup_failure_cause(
    role: str, rank: int, tail: Sequence[str], peers: Sequence[tuple[str, Sequence[str]]] = ()
) -> str | None:
    """``rank 0 could not set up: CheckpointError: ...`` (or a meeting's ``rank 1 could not
    make its all_equal description: ...``: the words as the ranks said them,
    :func:`~distconv.rank_endings.setup_failure_said_in_lines`), where ``tail`` (the last lines
    of the failed child, ``role`` ``rank``) says that a rank could not set up
    (:func:`~distconv.rank_endings.setup_failure_in_lines`), or, for a worker, where a peer's
    (``(role, tail)`` each: the other children) says that this worker could not: the failing
    rank's own lines say its error (a traceback), those of the ranks it told name it. None
    where none does."""
    said = setup_failure_said_in_lines(said_lines(tail))
    for peer_role, peer_tail in peers if said is None and role == "worker" else ():
        if peer_role == "worker" and (told_of := setup_failure_in_lines(said_lines(peer_tail))):
            if told_of[0] == rank:
                said = setup_failure_said_in_lines(said_lines(peer_tail))
                break
    return said


def silent_rank(tail: Sequence[str]) -> tuple[int, str] | None:
    """The one rank that ``tail`` (a worker's last lines) quotes a shard naming as keeping it
    waiting past its ``--timeout`` (:func:`~distconv.straggler_words.silent_ranks_in`), with the
    shard's words; None where they name none, or several (a link down: every rank was
    silent, none is singled out)."""
    return _alone(silent_ranks_in(said_lines(tail)))


def told_rank(tail: Sequence[str]) -> int | None:
    """The rank that ``tail`` (a victim's last lines) names as the failure's cause: the one
    that could not set up (:func:`~distconv.rank_endings.setup_failure_in_lines`), else the one
    a shard named as silent past its ``--timeout`` (:func:`silent_rank`); None where they name
    none."""
    found = setup_failure_in_lines(said_lines(tail))
    if found is not None:
        return found[0]
    silent = silent_rank(tail)
    return None if silent is None else silent[0]


def told(
    cause: str | None,
    role: str,
    rank: int,
    tail: Sequence[str],
    peers: Sequence[tuple[str, Sequence[str]]],
) -> str | None:
    """``cause`` (read so far) led by :func:`setup_failure_cause`'s, where there is one; else,
    for a worker that a shard named as silent past its ``--timeout`` (in its own last lines
    ``tail`` or a worker peer's), the shard's words, where ``cause`` is None."""
    said = setup_failure_cause(role, rank, tail, peers)
    if said is None:
        return cause if cause is not None or role != "worker" else _silence(rank, tail, peers)
    return f"{said}; {cause}" if cause else said


def _silence(
    rank: int, tail: Sequence[str], peers: Sequence[tuple[str, Sequence[str]]]
) -> str | None:
    """The shard's words naming worker ``rank`` alone as silent past its ``--timeout``, from its
    own last lines or a worker peer's (:func:`silent_rank`); None where none says so."""
    for lines in [tail, *(peer_tail for peer_role, peer_tail in peers if peer_role == "worker")]:
        if (silent := silent_rank(lines)) is not None and silent[0] == rank:
            return silent[1]
    return None


def named_silent(role: str, rank: int, cause: str | None) -> bool:
    """Whether ``cause`` (a failure's, as :func:`told` read it) is a shard's words naming
    worker ``rank`` alone as silent past its ``--timeout``: it kept the job waiting."""
    silent = silent_rank([cause or ""]) if role == "worker" else None
    return silent is not None and silent[0] == rank


def unanswered_shard(lines: Sequence[str]) -> tuple[int, str] | None:
    """The one shard that the last of ``lines`` (a worker's, its last words:
    :func:`launcher.failure.last_words`) that says shards never answered it names
    (:func:`~distconv.straggler_words.unanswering_shards_in`), with those words; None where none
    says so, or names several (a link down: no one shard is singled out, as no one rank is by
    :func:`silent_rank`)."""
    return _alone(unanswering_shards_in(said_lines(lines)))


def _alone(found: tuple[list[int], str] | None) -> tuple[int, str] | None:
    """The one number of ``found`` (the ranks or shards some words name, and the words) with
    the words; None where it is None or names several."""
    if found is None or len(set(found[0])) != 1:
        return None
    return found[0][0], found[1]
