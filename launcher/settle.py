"""Whom a victim's failure blames: a worker that exited 75 (another rank failed, or a shard
stopped on its own signal) waits the settle time for the failure that caused it
(:func:`settle`), and at the attempt's end the rank its whole output names as the failure's
cause (:func:`~launcher.named_cause.told_rank`: the one that could not set up, or the one a
shard named as silent past its ``--timeout``, a straggler), where that still ran at the
settle's end or exited 0 or 75 (:func:`nameable`), is blamed instead of it (:func:`blamed`).
:class:`launcher.supervisor.Supervisor`'s helpers, apart from its loop."""

from __future__ import annotations

import signal
import time

from .arrivals import Arrivals
from .child import Child
from .drained_shard import NAMED_SHARD_SECONDS, named_shard
from .failure import PEER_FAILED_STATUS
from .gang import first_failed
from .named_cause import told_rank

#: the signals by which the launcher's stop ends a worker: its SIGTERM, and the grace's SIGKILL
STOP_ENDS = (signal.SIGTERM, signal.SIGKILL)
#: how a worker that handles the stop's SIGTERM exits (128 + SIGTERM): the stop's status too
STOPPED_STATUS = 128 + signal.SIGTERM


def settle(
    victim: Child,
    children: list[Child],
    workers: list[Child],
    seconds: float,
    poll: float,
    arrivals: Arrivals,
) -> tuple[Child, list[Child] | None]:
    """The failure that made ``victim`` (the first failure) stop: the first that is no
    victim, seen within ``seconds`` of its exit, before a signal to the launcher and while a
    worker runs, or the exit of a shard that a victim's lines name as stopped on its own
    SIGTERM (:func:`~launcher.drained_shard.named_shard`: its workers, told at once, may all
    exit before it), which is waited for, for its answer window at least
    (:data:`~launcher.drained_shard.NAMED_SHARD_SECONDS`: a silent worker keeps it up); else
    ``victim``, with the workers it may name (:func:`nameable`, for :func:`blamed`: one may
    hang after its failure, its victim's 75 no "try again"), None where a signal to the
    launcher ended the settle. Nothing is signalled yet."""
    deadline = victim.exited_at + seconds
    while True:
        signalled = bool(arrivals.signals())
        working = any(c.poll() is None for c in workers)
        shard = named_shard(children)  # a victim's words: a shard stopped on its own SIGTERM
        cause = first_failed(children, working, victims=False)
        if cause is None and shard is not None and shard.poll() is not None:
            cause = shard  # its exit 0 came once every worker had stopped on its words
        if cause is not None and cause.exited_at < arrivals.first_at:
            return cause, None
        if signalled:
            return victim, None
        awaited = working or (shard is not None and shard.poll() is None)
        if shard is not None:
            deadline = max(deadline, victim.exited_at + NAMED_SHARD_SECONDS)
        if not awaited or time.monotonic() >= deadline:  # whom it names: once its output is
            return victim, nameable(victim, workers)  # in (blamed)
        time.sleep(poll)


def nameable(victim: Child, workers: list[Child]) -> list[Child]:
    """The workers other than ``victim`` that its lines may name as the failure's cause (the
    rank that could not set up, or a straggler), at the settle's end: those still running, and
    those that exited 0 or 75 (no failure of their own that the settle would have seen), within
    the settle or before it, as one that exits so after it is: a rank named whose exit happened
    to fall inside the settle left the victim blamed, and the launcher exiting 75, "try again
    later"."""
    return [w for w in workers if w is not victim and w.poll() in (None, 0, PEER_FAILED_STATUS)]


def blamed(
    failed: Child, outstayed: list[Child] | None, stopped: list[Child]
) -> tuple[Child, bool]:
    """Whom to blame for ``failed``, and whether the stop ended it (in ``stopped``, running as
    it began, ended by a signal the stop sends, :data:`STOP_ENDS`, or exiting
    :data:`STOPPED_STATUS` on its SIGTERM; a signal of its own, as a SIGABRT after it ignored
    the SIGTERM, is its own status): at a settle's end (``outstayed``: the workers the victim
    may name then, :func:`nameable`), the worker the victim's whole output names as the
    failure's cause (:func:`~launcher.named_cause.told_rank`: the rank that could not set up,
    or the one a shard named as silent past its ``--timeout``), where it is one of them; else
    ``failed``."""
    named = None if outstayed is None else told_rank(list(failed.tail))
    cause = next((w for w in outstayed or () if w.spec.rank == named), None)
    if cause is None:
        return failed, False
    return cause, ended_by_stop(cause, stopped)


def ended_by_stop(child: Child, stopped: list[Child]) -> bool:
    """Whether the launcher's stop ended ``child``: it was running as the stop began (in
    ``stopped``), then ended by a signal the stop sends (its stop signals, :data:`STOP_ENDS`)
    or exited as a handler of one does (:data:`STOPPED_STATUS`: 128 + the signal). Not a
    signal of its own (a SIGABRT after it ignored the SIGTERM), nor an exit before the stop."""
    if child not in stopped:
        return False
    code, sent = child.poll() or 0, {*STOP_ENDS, *child.spec.stop_signals}
    return -code in sent or code - 128 in sent
