"""The failure an attempt reports, once its children have ended and their tails are whole:
whom to blame for the first child that failed (a victim's named cause, :func:`~launcher.settle.
blamed`; the worker whose own signal stopped the ranks, :func:`~launcher.own_stop.
signalled_worker`), and the job's error another child said (:func:`~launcher.job_error.
said_elsewhere`). :class:`launcher.supervisor.Supervisor`'s helper, apart from its loop."""

from __future__ import annotations

from dataclasses import replace

from .child import Child
from .failure import Failure
from .job_error import said_elsewhere
from .own_stop import signalled_worker
from .settle import blamed


def attempt_failure(
    failed: Child,
    children: list[Child],
    outstayed: list[Child] | None,
    stopped: list[Child],
    restart: int,
) -> Failure:
    """The report of attempt ``restart``, whose first failure was ``failed``: ``outstayed``,
    the workers a victim's settle may name (None where it did not end so), ``stopped``, the
    children running as the attempt's stop began."""
    named, ended_by_stop = blamed(failed, outstayed, stopped)
    cause = signalled_worker(failed, children) if named is failed else named
    failure = cause.failure(restart, [c for c in children if c is not cause])
    failure = failure if named is failed else failure.outstayed(ended_by_stop)
    said = said_elsewhere(children, stopped, restart)  # its victims' cause, stopped
    return replace(failure, job_error_elsewhere=said)
