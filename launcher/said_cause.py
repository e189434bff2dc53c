"""What a failed child's last words add to the cause its status gives, for
:class:`launcher.failure.Failure`: its last words (:func:`last_words`), a mismatch of jobs, a
rank that could not set up, a divergence (:mod:`launcher.divergence`), each of which stops every
rank alike; and the words of why the job's own error is not restarted."""

from __future__ import annotations

import re
from collections.abc import Sequence

from distconv.rank_endings import different_jobs_in, setup_failure_in_lines

from .divergence import divergence_in
from .named_cause import said_lines, setup_failure_cause
from .rank_reason import rank_text


def words_cause(
    role: str, rank: int, tail: Sequence[str], cause: str | None, exited_failed: bool
) -> str | None:
    """``cause`` (what the status and the child's reader say, or None) led by what the last
    lines ``tail`` of ``role`` ``rank`` say stopped every rank alike: a rank that could not set
    up (:func:`~launcher.named_cause.setup_failure_cause`), ranks that run different jobs
    (:func:`~distconv.rank_endings.different_jobs_in`), or, where it exited non-zero of itself
    (``exited_failed``), a divergence in its last words (:func:`~launcher.divergence.
    divergence_in`). The first to exit is no culprit then, and its status says no more than
    "1"; the cause read so far (mpiexec's status apart from the failing rank's) follows."""
    # a rank's failure told to the others is no mismatch, though a shard's refusal says it so
    if is_mismatch(cause) or is_told(cause) or divergence_in([cause or ""]) is not None:
        return cause  # read already (a Failure replaced: the words are in its cause)
    said = setup_failure_cause(role, rank, tail)
    if said is None:
        said = different_jobs_in(said_lines(tail))
    if said is None and exited_failed:
        said = divergence_in(last_words(tail))
    if said is None:
        return cause
    said = once(said)
    return f"{said}; {cause}" if cause else said


def is_mismatch(cause: str | None) -> bool:
    """Whether ``cause`` says that the ranks run different jobs."""
    return different_jobs_in([cause or ""]) is not None


def is_told(cause: str | None) -> bool:
    """Whether ``cause`` begins with a rank's setup failure that its peers were told of."""
    return setup_failure_in_lines([(cause or "").partition("; ")[0]]) is not None


def once(said: str) -> str:
    """``said`` up to the ``; `` after which its words so far are quoted again, the longest such
    start: a rank left waiting by a mismatch says it, then where each rank was, the one that
    closed quoting the mismatch again (``X; ranks are at different points of the job (...
    closed on "JobRefused: ...: X"): ...``, some 900 characters), where ``X`` is the cause."""
    cut = len(said)
    at = said.find("; ")
    while at != -1:
        if said[:at] in said[at:]:
            cut = at
        at = said.find("; ", at + 2)
    return said[:cut]


def job_error_text(name: str, who: str | None = None) -> str:
    """Why a failure is not restarted where the job's own error ``name`` (``DataError``) ended
    it (said by ``who``, ``worker 0``, where that is another child than the failure's)."""
    by = f", said by {who}" if who is not None else ""
    return (
        f"the job's own {name} (of its data, model or configuration){by}, which every attempt "
        "would stop on"
    )


def last_words(tail: Sequence[str]) -> list[str]:
    """The last non-blank line of ``tail`` (a child's last lines) as the process wrote it
    (:func:`~launcher.named_cause.said_lines`), its last words; where MPI tagged its ranks'
    lines, each rank's, but MPICH's notice of the ``MPI_Abort`` that its own ending called
    (``Abort(1) on node 0 ...``)."""
    last: dict[int | None, str] = {}
    for line, whole in zip(said_lines(tail), tail, strict=True):
        tag = rank_text(whole)[0]
        if line.strip() and not (tag is not None and _MPI_ABORT.match(line)):
            last.pop(rank := None if tag is None else int(tag[1]), None)
            last[rank] = line  # in the order of each rank's last line
    if any(rank is not None for rank in last):
        last.pop(None, None)  # mpiexec's own lines: its banner on a failed rank
    return list(last.values())


#: MPICH's line, tagged with the rank, after that rank called ``MPI_Abort``
_MPI_ABORT = re.compile(r"Abort\(\d+\) on node \d+ ")
