"""Whether an attempt ended on an error of the job itself that the failure blamed did not say:
a rank that stopped on its ``DataError`` and was slow to exit, so that the victim it left (a
worker's exit 75) came first and was blamed, and the launcher's stop then ended that rank. Its
last words say the job error; a restart would meet it again (:func:`said_elsewhere`, read into
:attr:`launcher.failure.Failure.job_error_elsewhere`)."""

from __future__ import annotations

from collections.abc import Sequence

from distconv.rank_endings import job_error_in

from .child import Child
from .failure import last_words
from .settle import ended_by_stop


def said_elsewhere(
    children: Sequence[Child], stopped: list[Child], restart: int
) -> tuple[str, str] | None:
    """The job's own error (its class) that a child of the attempt (``restart``) said in its
    last words, and who (``worker 0``), where every child that failed of itself failed on it:
    each other child succeeded, stopped because another rank failed (a worker's exit 75), or
    was ended by the launcher's stop (:func:`~launcher.settle.ended_by_stop`: running as it
    began, in ``stopped``). None where none said one, or where a child failed of anything
    else before the stop, a signal of its own included (an OOM kill, a node lost): that may
    be the cause, and a restart may get past it."""
    found = None
    for child in children:
        code, who = child.poll(), f"{child.spec.role} {child.spec.rank}"
        if code == 0 and (child.spec.role != "server" or child in stopped):
            continue  # a worker that succeeded, a server that the stop ended
        if child.victim or ended_by_stop(child, stopped):
            said = job_error_in(last_words(list(child.tail)))
        elif (said := child.failure(restart).job_error) is None:  # failed of itself
            return None
        if said is not None and found is None:
            found = (said[0], who)
    return found
