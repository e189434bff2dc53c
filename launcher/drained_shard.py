"""A shard's exit 0 while workers still run, as :class:`launcher.supervisor.Supervisor` reads
it: provisional. A shard signalled on its own (a ``kill`` of the wrong pid, a node agent that
stops ``distconv pserver`` processes) drains: it serves on until every worker says ``bye``
(:mod:`distconv.sync.ps.drain`), and exits 0 then, just before the workers' processes end.
Counted as a failure at once, that reported a finished job as failed, and a restart was spent
on it. So the launcher waits for the workers (:func:`workers_finish`): all exit 0, the
attempt succeeded; all end, each with 0 or a checkpointed stop
(:func:`~.own_stop.stopped_with_checkpoint`: the signal reached the workers too, a node
agent's to every process, and the shard drained for their stop), the stop is what the
launcher reports; one fails otherwise (a shard whose drain ended with workers still training
leaves them no shard: they fail at their next step), a signal comes, or the wait runs out, and
the shard's exit is the failure, but where another worker stopped with its checkpoint: then
the worker's crash is (:func:`launcher.own_stop.stopped_together`).
"""

from __future__ import annotations

import time

from .arrivals import Arrivals
from .child import Child
from .own_stop import stopped_with_checkpoint


def workers_finish(
    shard: Child, workers: list[Child], seconds: float, poll: float, arrivals: Arrivals
) -> bool:
    """Whether every worker ends within ``seconds`` of ``shard``'s exit 0, each with 0 or a
    checkpointed stop (the shard's exit is no failure then: the workers' stop, if any, is
    theirs to report), before any worker fails otherwise or a stop signal reaches the
    launcher. Nothing is signalled meanwhile."""
    deadline = shard.exited_at + seconds
    while True:
        if all(w.poll() == 0 or stopped_with_checkpoint(w) for w in workers):
            return True
        if any(w.failed() and not stopped_with_checkpoint(w) for w in workers):
            return False
        if arrivals.signals():
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
