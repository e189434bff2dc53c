"""A checkpointed stop as the workers' last lines tell it: which rank got the stop signal
itself (its line ``stopped by SIGTERM after step N``) and which stopped with it (``stopped
after step N: rank 1 got SIGTERM``: :class:`distconv.stop_agreement.AgreedStop`).

The ranks agree on a stop and exit together with the same status, so the first to exit is
no more the cause than the others: the launcher blames the worker whose line says the signal
was its own (:func:`signalled_worker`), and a report of such a stop says how to go on
(:func:`launcher.go_on.go_on_after_stop`).
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # not at run time: launcher.failure reads stop lines, and child imports it
    from .arrivals import Arrivals
    from .child import Child

#: the exit statuses of a stop that wrote its checkpoint (128 + SIGTERM, 128 + SIGINT)
CHECKPOINTED = (143, 130)
#: the statuses (:meth:`Child.poll`'s terms) of a worker those signals end (Python's default
#: handler, which ``distconv train`` restores after its stop): after its stop line, a late
#: signal (a scheduler's second SIGTERM, one per worker in turn), not a crash
STOP_SIGNALS = (-signal.SIGTERM, -signal.SIGINT)
#: seconds after a worker's death by one of :data:`STOP_SIGNALS` that its stop line may take
#: to reach its tail: the pump may not have read the pipe's last lines when the waiter sees the
#: exit. Milliseconds as a rule; more where the launcher's own output holds the pump up
PUMP_END_SECONDS = 2.0
#: the role of a child that holds ranks' lines, not one rank's (distconv-launch mpi)
_MPIEXEC = "mpiexec"
#: a rank that got the signal itself
_OWN = re.compile(r"\bstopped by (SIGTERM|SIGINT) after step (\d+)\b")
#: a rank stopped with the ranks that got it: one named, or how many
_WITH = re.compile(
    r"\bstopped after step (\d+): (?:rank (\d+)|(\d+) ranks|(a pserver shard|pserver shard \d+)) "
    r"got (SIGTERM|SIGINT)\b"
)


@dataclass(frozen=True)
class StopSaid:
    """What a stop line says.

    Attributes:
        signal: ``SIGTERM`` or ``SIGINT``.
        step: the step the ranks stopped after (and checkpointed).
        own: whether the rank that said it got the signal itself.
        rank: on a rank stopped with another, the rank that got it, where one alone did.
        count: on a rank stopped with others, how many ranks got it (1 where one is named).
        shard: on a rank a parameter-server shard's own SIGTERM stopped (it asked the ranks for
            the stop while it drained), that shard as the line names it
            (``pserver shard 1``, or ``a pserver shard``); None otherwise.
    """

    signal: str
    step: int
    own: bool
    rank: int | None = None
    count: int = 1
    shard: str | None = None

    def headline(self, role: str, rank: int, code: int | None) -> str:
        """The report's headline for the child ``role`` ``rank`` that said it and exited
        ``code`` (None: a signal ended it after the line, which the report's cause says): a
        stop with a checkpoint, whose signal was its own or another rank's."""
        if self.own:  # mpiexec's own: its ranks' lines (every one it holds) say so
            whose = "its ranks' own" if role == _MPIEXEC else "its own"
            how = f"by {whose} {self.signal} after step {self.step}"
        else:
            how = f"after step {self.step} because {self.who(role, rank)}"
        exited = "" if code is None else f" (exit code {code})"
        return f"{role} {rank} stopped {how}, with a checkpoint{exited}"

    def who(self, role: str, rank: int) -> str:
        """Who got the signal, for a report of the child ``role`` ``rank`` that said it."""
        if self.own and role == _MPIEXEC:  # no signal of its own: its ranks said it
            return f"{role} {rank}'s ranks got {self.signal} themselves"
        if self.own:
            return f"{role} {rank} got {self.signal} itself"
        if self.shard is not None:  # a shard stopped alone asked the ranks for the stop
            return f"{self.shard} got {self.signal}"
        named = f"rank {self.rank}" if self.rank is not None else f"{self.count} ranks"
        return f"{named} got {self.signal}"


def stop_said(lines: Iterable[str]) -> StopSaid | None:
    """The last stop line among ``lines`` (a child's tail), or None: a rank's stop with a
    checkpoint. An ``mpiexec``'s tail holds every rank's: one naming another rank wins there,
    since it names the rank that ``mpiexec``'s own name hides."""
    own, other = None, None
    for line in lines:
        if m := _OWN.search(line):
            own = StopSaid(m.group(1), int(m.group(2)), own=True)
        elif m := _WITH.search(line):
            rank, count = m.group(2), m.group(3)
            other = StopSaid(
                m.group(5),
                int(m.group(1)),
                own=False,
                rank=None if rank is None else int(rank),
                count=1 if count is None else int(count),
                shard=m.group(4),
            )
    return other or own


def stopped_together(
    first: Child, workers: Sequence[Child], seconds: float, poll: float, arrivals: Arrivals
) -> Child:
    """The child to report for ``first``, the first child to fail. Where it is a worker's
    checkpointed stop (its exit :data:`CHECKPOINTED`), wait up to ``seconds`` after its exit
    for the other workers, which agreed on the same step, to end on their own, before a signal
    to the launcher: the launcher's stop would reach one closing after its stop line, and end
    it by SIGTERM, not with its own 143, so :func:`signalled_worker` could not blame it. A
    worker that ended otherwise meanwhile (an error at its close, a kill as it saved) is the
    one reported (:func:`_failed_otherwise`): a report of ``first`` would call it no crash.
    Where ``first`` is a worker a late signal ended after its stop line
    (:func:`stopped_with_checkpoint`), the first worker that exited :data:`CHECKPOINTED` stands
    for the stop, if one did. Where ``first`` is a shard's exit 0 that did not end with every
    worker finished (:func:`~launcher.drained_shard.workers_finish`), see
    :func:`_crashed_in_drain`; where it is a shard a stop signal ended, see
    :func:`_shard_ended_in_stop`. Nothing is signalled."""
    if first.spec.role == "server" and first.poll() == 0:
        return _crashed_in_drain(first, workers, seconds, poll, arrivals)
    if first.spec.role == "server" and first.poll() in STOP_SIGNALS:
        return _shard_ended_in_stop(first, workers, seconds, poll, arrivals)
    if not stopped_with_checkpoint(first):
        return first
    _await_workers(first.exited_at + seconds, workers, poll, arrivals)
    if (otherwise := _failed_otherwise(workers, arrivals.first_at)) is not None:
        return otherwise
    exited = [w for w in workers if w.poll() in CHECKPOINTED]
    return first if first in exited or not exited else min(exited, key=lambda w: w.exited_at)


def _crashed_in_drain(
    shard: Child, workers: Sequence[Child], seconds: float, poll: float, arrivals: Arrivals
) -> Child:
    """The child to report for ``shard``'s exit 0 while workers ran, where a worker then
    failed otherwise (:func:`_failed_otherwise`): that worker, once the others have ended or
    ``seconds`` after its failure, where one of them stopped with its checkpoint
    (:func:`stopped_with_checkpoint`: the signal reached every process, and the shard drained
    for their stop), since its crash is the failure, which the shard's exit named nowhere;
    else ``shard`` (signalled alone, it left the workers training without a shard)."""
    failed = _failed_otherwise(workers, arrivals.first_at)
    if failed is None:  # the wait for the workers ran out, or a signal came
        return shard
    _await_workers(failed.exited_at + seconds, workers, poll, arrivals)
    if not any(stopped_with_checkpoint(w) for w in workers):
        return shard
    return _failed_otherwise(workers, arrivals.first_at) or failed


def _shard_ended_in_stop(
    shard: Child, workers: Sequence[Child], seconds: float, poll: float, arrivals: Arrivals
) -> Child:
    """The child to report for ``shard``, which a SIGTERM or SIGINT ended: where the workers
    all end within ``seconds`` of it and one of them stopped with its checkpoint
    (:func:`stopped_with_checkpoint`), that stop (:func:`stopped_together` of the first), or
    a worker that failed otherwise meanwhile; else ``shard``. A shard drains at SIGTERM and
    stops at SIGINT by its own handlers, which Python takes back as the interpreter ends: the
    signal repeated to every process of the job (a node agent's second SIGTERM) ends it by
    the signal as it exits after its drain, no failure of the workers' stop. A shard that such
    a signal ended before it served (its handlers not yet set) left no checkpointed stop."""
    _await_workers(shard.exited_at + seconds, workers, poll, arrivals)
    stopped = [w for w in workers if stopped_with_checkpoint(w)]
    if not stopped:
        return shard
    if (otherwise := _failed_otherwise(workers, arrivals.first_at)) is not None:
        return otherwise
    if any(w.poll() is None for w in workers):  # left without their shard: its failure
        return shard
    first = min(stopped, key=lambda w: w.exited_at)
    return stopped_together(first, workers, seconds, poll, arrivals)


def _await_workers(
    deadline: float, workers: Sequence[Child], poll: float, arrivals: Arrivals
) -> None:
    """Until every one of ``workers`` has ended, ``deadline`` (monotonic), or a signal to the
    launcher."""
    while any(w.poll() is None for w in workers) and not arrivals.signals():
        if time.monotonic() >= deadline:
            return
        time.sleep(poll)


def checkpointed_stop(role: str, status: int | None, tail: Iterable[str]) -> StopSaid | None:
    """What the stop line in ``tail`` says, where it makes the end of the child ``role``, whose
    status is ``status`` (:meth:`Child.poll`'s terms: minus the signal that ended it), a
    checkpointed stop, not a crash: it exited :data:`CHECKPOINTED` (a worker, or ``mpiexec``
    holding its ranks' lines), or it is a worker that a SIGTERM or SIGINT ended after its stop
    line (a signal of its own as it closed after the ranks' agreed stop: a second SIGTERM of a
    node agent, a user's kill of each worker in turn); None otherwise. The one rule the
    launcher's choice of whom to report, its report's headline, ``failure.json`` and the way on
    all read."""
    if status in CHECKPOINTED or (role == "worker" and status in STOP_SIGNALS):
        return stop_said(tail)
    return None


def ended_after_stop(signal_name: str) -> str:
    """The cause of a :func:`checkpointed_stop` that the signal ``signal_name`` (``SIGTERM``)
    ended after its stop line, in the report and ``failure.json``: what its status (a death
    by that signal, as a crash's) cannot say."""
    return f"a later {signal_name} ended it as it closed, after its stop and checkpoint"


def stopped_with_checkpoint(child: Child) -> bool:
    """Whether ``child`` is a worker that stopped with its checkpoint, which counts as no
    failure of its own: it exited :data:`CHECKPOINTED` (its line may still be on its way), or
    a :func:`checkpointed_stop` whose signal ended it after its stop line, read once its pump
    has copied the child's last lines (up to :data:`PUMP_END_SECONDS` after its exit: the line
    may still be in the pipe as the waiter sees the exit)."""
    if child.spec.role != "worker":
        return False
    status = child.poll()
    if status in CHECKPOINTED:
        return True
    if status not in STOP_SIGNALS:
        return False
    # a copy: read while the job runs, the pump may still append to the tail. The wait only
    # where the line is not there yet: a process of its group that outlives it (a pool's
    # worker) holds the pipe, and the pump's end, until the launcher's stop
    if checkpointed_stop(child.spec.role, status, list(child.tail)) is not None:
        return True
    child.output_read(child.exited_at + PUMP_END_SECONDS)
    return checkpointed_stop(child.spec.role, status, list(child.tail)) is not None


def _failed_otherwise(workers: Sequence[Child], before: float) -> Child | None:
    """The first of ``workers`` that failed, before ``before`` (a signal to the launcher),
    neither stopped with its checkpoint (:func:`stopped_with_checkpoint`) nor a victim
    (:attr:`Child.victim`); None if none."""
    failed = [
        w
        for w in workers
        if w.failed() and not stopped_with_checkpoint(w) and not w.victim and w.exited_at < before
    ]
    return min(failed, key=lambda w: w.exited_at) if failed else None


def signalled_worker(failed: Child, children: Sequence[Child]) -> Child:
    """The worker to blame for ``failed``, the first child to fail: where it is a worker
    that stopped with a checkpoint (:func:`checkpointed_stop`: exited so, or a later signal
    ended it) because another rank got the signal (its line says so), the lowest-ranked
    worker that ended so too, whichever way (an exit 143 or a later signal: a signal repeated
    to the one worker ends it, and only it, by the signal), and whose line says the signal was
    its own; else ``failed``. Read after the attempt's end, when every tail is whole."""
    said = _checkpointed(failed)
    if said is None or said.own:
        return failed
    own = [c for c in children if _checkpointed(c) is not None and _own_stop(c, said.step)]
    return min(own, key=lambda c: c.spec.rank) if own else failed


def _checkpointed(child: Child) -> StopSaid | None:
    """What ``child``'s last lines say of its checkpointed stop, where it is a worker that
    ended so (:func:`checkpointed_stop`); None otherwise."""
    if child.spec.role != "worker":
        return None
    return checkpointed_stop(child.spec.role, child.poll(), child.tail)


def _own_stop(child: Child, step: int) -> bool:
    """Whether ``child``'s line says it got the signal itself, stopping at ``step``."""
    said = stop_said(child.tail)
    return said is not None and said.own and said.step == step
