"""The failure as the attempt's stop found its gang (:mod:`launcher.stopped_processes`): a
child whose process the stop found stopped is said to have been stopped, not to have crashed
or hung; and where the child that failed only gave up waiting (a worker's wait on its shards
past its timeout), the one process found stopped, which held that wait up, is blamed instead.

A program of one's own that gives its sync ``timeout=1`` waits 1.5 s for its shards, which
wait their own 60 s for every worker: one worker stopped, the shard holds the step for it, and
the healthy worker gives up on the shard first and exits 1; it was the failure reported, the
stopped worker named nowhere."""

from __future__ import annotations

from dataclasses import replace

from distconv.straggler_words import gave_up_in

from .child import Child
from .failure import Failure, last_words
from .stopped_processes import STOPPED_BY, StopFindings, StoppedProcess


def as_found(failure: Failure, findings: StopFindings) -> Failure:
    """``failure``, its attempt's, with what that attempt's stop found (``findings``): its own
    process stopped (:attr:`~launcher.failure.Failure.found_stopped`); else, where it exited
    (no signal: a crash is its own, whatever its last words) having given up a wait
    (:func:`~distconv.straggler_words.gave_up_in`, in its last words or its cause) and the
    stop found one process of the gang stopped, that process's child's failure (several: each
    said in ``failure``'s cause, and what stopped them kept for the headline's way out:
    :attr:`~launcher.failure.Failure.stopped_beside`); else ``failure``."""
    if not findings.stopped:  # nothing stopped: nothing to say or to move
        return failure
    if (own := findings.of(failure.log)) is not None:
        return replace(failure, found_stopped=own)
    if failure.signal is not None:  # a death by a signal of its own is no wait given up
        return failure
    words = gave_up_in([*last_words(failure.tail), failure.cause or ""])
    if words is None:
        return failure
    if len(findings.stopped) != 1:  # several: none singled out, each said, with its way out
        cause = f"{failure.cause or words}; {_several_stopped(findings)}"
        return replace(
            failure, cause=cause, stopped_beside=tuple(p.by for _, p in findings.stopped)
        )
    child, process = findings.stopped[0]
    return _stopped_failure(child, process, findings, failure, words)


def _stopped_failure(
    child: Child, process: StoppedProcess, findings: StopFindings, failure: Failure, words: str
) -> Failure:
    """The failure of ``child``, whose ``process`` the stop found stopped and then ended
    (:meth:`~launcher.failure.Failure.outstayed`: no status of its own), its cause the workers
    that gave up waiting (``failure``'s child, at least) and the words of ``failure``'s
    (``words``)."""
    others = [c for c in findings.gang if c is not child]
    blamed = child.failure(failure.restart, others).outstayed(stopped=True)
    gave_up = [f"{c.spec.role} {c.spec.rank}" for c in others if _gave_up(c)]
    names = ", ".join(gave_up) or f"{failure.role} {failure.rank}"
    said = f"{names} gave up waiting: {words}"
    cause = f"{blamed.cause}; {said}" if blamed.cause else said
    return replace(blamed, cause=cause, found_stopped=process)


def _several_stopped(findings: StopFindings) -> str:
    """What a failure that gave up a wait adds where the stop found several processes
    stopped: each, none singled out (``worker 1's process (pid 7, SIGSTOP)``, ``(pid 8, held
    by a debugger)``)."""
    found = ", ".join(
        f"{c.spec.role} {c.spec.rank}'s process (pid {p.pid}, {_how(p.by)})"
        for c, p in findings.stopped
    )
    return f"the launcher's stop found stopped {found}, any of which may have held that wait up"


def _how(by: str) -> str:
    """``SIGSTOP``, or ``held by a debugger``: what stopped a process, in a list of several."""
    return by if by == STOPPED_BY["T"] else f"held by {by}"


def _gave_up(child: Child) -> bool:
    """Whether ``child``'s last words give up a wait on its shards."""
    return gave_up_in(last_words(list(child.tail))) is not None
