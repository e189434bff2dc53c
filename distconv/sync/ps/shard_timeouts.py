"""The shards' own timeouts, as their ``hello`` replies say them, beside this worker's.

A shard holds a step, a gather or a barrier for its ``--timeout`` until every worker has
come, then fails it naming the worker that never came. A worker whose wait for the shard's
reply (``GRACE`` x its ``timeout``) is no longer gives up first and names the shard, which is
healthy: the cause reaches only the shard's log. Its waits stay as the user set them (a short
one names a hung shard soon, which a longer one would not); the worker says so once, at
setup, and a wait that gives up on such a shard says what it may be waiting for.

The rule (:func:`outwaiting`) and the words of the warning's cause and way out
(:func:`blamed_on_shard`, :func:`outwaited_fix`) are shared with ``distconv check-manifests``
(:mod:`distconv.deploy.check_timeouts`), which names such shards before the job is applied."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from distconv.sync.ps.config import MIN_TIMEOUT

log = logging.getLogger("distconv.pserver")

#: a gather's tag, as a wait names it: its kind and number (``all_equal:1``, ``barrier:4``)
GATHER_TAG = re.compile(r"\w+:\d+")


def shard_timeouts(hellos: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """Each shard's ``timeout`` from its hello reply (by shard), where it gave a usable one (a
    shard of an older release may give none)."""
    found = {s: h.get("timeout") for s, h in enumerate(hellos)}
    return {
        s: float(t)
        for s, t in found.items()
        if type(t) in (int, float) and math.isfinite(t) and t > 0
    }


def shorter_shards(limit: float) -> str:
    """The warning's other way out, for a worker that waits ``limit`` seconds: shards started
    with a shorter ``--timeout``, where a shard takes one (none below ``MIN_TIMEOUT``, at which
    the launcher floors the workers' timeout it gives them)."""
    return f", or start the shards with a --timeout below {limit:g}" if limit > MIN_TIMEOUT else ""


def outwaiting(timeouts: Mapping[int, float], limit: float, world_size: int) -> dict[int, float]:
    """The shards of ``timeouts`` (each one's ``--timeout``, by shard) that wait for a worker at
    least as long as ``limit``, a worker's wait for their reply (``GRACE`` x its timeout); none
    in a job of fewer than two workers (``world_size``), where a shard waits for no other (a
    silent shard there is stopped or hung, not waiting)."""
    if world_size < 2:
        return {}
    return {s: t for s, t in timeouts.items() if t >= limit}


def blamed_on_shard(reporter: str) -> str:
    """What shards that outwait their workers (:func:`outwaiting`) make of a worker that never
    comes, reported by ``reporter`` (``here``: the worker that warns; ``by the workers``)."""
    return (
        f"a worker that does not come would be reported {reporter} as a shard that gives no "
        "answer, and named only in the shard's log"
    )


def outwaited_fix(longest: float, limit: float) -> str:
    """The ways out for workers that wait ``limit`` seconds for shards that wait up to
    ``longest`` for every worker: a longer worker ``timeout``, or shorter shards
    (:func:`shorter_shards`)."""
    return (
        f"pass timeout={longest:g} or more (distconv train: --timeout {longest:g})"
        f"{shorter_shards(limit)}"
    )


def holds_for_workers(what: str, mode: str) -> bool:
    """Whether a shard holds its replies to the requests ``what`` names (a wait's words) until
    every worker asked: a gather's (its tag, ``all_equal:1``), and a step's pushes in sync mode
    (``step 3``). It answers the others at once (a pull, stats, a hello)."""
    return GATHER_TAG.fullmatch(what) is not None or (what.startswith("step ") and mode == "sync")


class ShardTimeouts:
    """What :class:`~.channel.ShardChannel` knows of its shards' timeouts (a mixin): it
    reads ``timeout``, ``rank``, ``world_size``, ``mode`` and ``_named`` of the worker."""

    timeout: float
    rank: int
    world_size: int
    mode: str
    #: each shard's timeout, from its latest hello reply (a dict never changed in place)
    _shard_timeouts: Mapping[int, float] = {}
    #: the warning of :meth:`_take_shard_timeouts` was logged (once per worker)
    _shorter_wait_told = False

    def _take_shard_timeouts(self, hellos: Sequence[Mapping[str, Any]], limit: float) -> None:
        """Keep the timeouts ``hellos`` (the shards' hello replies) say; where this worker's
        wait ``limit`` is no longer than one of them, log a warning (once) naming both and
        the ways out (a job of several workers only: :meth:`_waiting_longer`)."""
        self._shard_timeouts = shard_timeouts(hellos)
        longer = self._waiting_longer(self._shard_timeouts, limit)
        if not longer or self._shorter_wait_told:
            return
        self._shorter_wait_told = True
        longest = max(longer.values())
        log.warning(
            "rank %d: this worker waits %g s for a shard's reply (%g x timeout=%g s), and "
            "pserver shard(s) %s wait up to %g s (their --timeout) for every worker: %s; %s",
            self.rank, limit, limit / self.timeout, self.timeout, self._named(sorted(longer)),
            longest, blamed_on_shard("here"), outwaited_fix(longest, limit),
        )  # fmt: skip

    def _shorter_wait_hint(self, shards: Sequence[int], limit: float, what: str) -> str:
        """What a wait of ``limit`` seconds for the replies to ``what`` that gives up on
        ``shards`` adds where one of them holds those replies for every worker as long: it may
        be waiting for one, which its log names."""
        if not holds_for_workers(what, self.mode):
            return ""
        timeouts = {s: self._shard_timeouts[s] for s in shards if s in self._shard_timeouts}
        longer = self._waiting_longer(timeouts, limit)
        if not longer:
            return ""
        return (
            f" (shard(s) {', '.join(map(str, sorted(longer)))} wait up to "
            f"{max(longer.values()):g} s for every worker, no less than this wait: a worker "
            "that has not come, which the shard's log names, is the likelier cause; see the "
            "warning at setup)"
        )

    def _waiting_longer(self, timeouts: Mapping[int, float], limit: float) -> dict[int, float]:
        """The shards of ``timeouts`` that wait for a worker at least as long as ``limit``, in
        this worker's job (:func:`outwaiting`)."""
        return outwaiting(timeouts, limit, self.world_size)
