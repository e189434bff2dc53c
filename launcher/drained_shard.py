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

Such a shard fails the job first, naming itself (``shard 0 stopped on its SIGTERM while
rank(s) 0, 1 trained on 16 steps ...``), and its workers stop on those words as victims (exit
75); they may exit before the launcher sees the shard's own exit. So a victim whose last lines
name such a shard (:func:`stopped_shard_in`) waits for that shard's exit in its settle
(:func:`named_shard`, :func:`launcher.settle.settle`), which blames the shard, not the victim.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from .arrivals import Arrivals
from .child import Child
from .own_stop import stopped_with_checkpoint

#: the words a shard fails the job with when it stops on its own SIGTERM with workers still in
#: (:func:`distconv.sync.ps.drain.stopped_words`), as its workers' last lines quote them
_STOPPED = re.compile(r"\bshard (\d+) stopped on its SIGTERM\b")
#: how long after a victim's exit the settle waits for the shard its lines so name: the shard
#: answers on for 3 s at most for a worker not yet told (a silent one: a long evaluation, a
#: hung worker; ``distconv.sync.ps.drain.ANSWER_SECONDS``), then keeps its last replies 1 s
#: at its close (``TOLD_LINGER_MS``), then exits; a second more for its exit to be seen
NAMED_SHARD_SECONDS = 5.0


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


def stopped_shard_in(lines: Sequence[str]) -> int | None:
    """The shard that the last of ``lines`` (a worker's tail) to quote a shard's failure on its
    own SIGTERM names (see the module); None where none does."""
    for line in reversed(lines):
        if (found := _STOPPED.search(line)) is not None:
            return int(found[1])
    return None


def named_shard(children: Sequence[Child]) -> Child | None:
    """The server that a victim's last lines (a worker that exited 75) name as a shard stopped
    on its own SIGTERM (:func:`stopped_shard_in`), whether it has exited yet or not; None where
    no victim names one of ``children``'s servers."""
    servers = {c.spec.rank: c for c in children if c.spec.role == "server"}
    for child in children:
        if child.victim:  # a copy: its pump may still append to the tail
            shard = stopped_shard_in(list(child.tail))
            if shard in servers:
                return servers[shard]
    return None
