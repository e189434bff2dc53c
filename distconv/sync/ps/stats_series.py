"""A shard's stats (docs/protocol.md, "Stats") as Prometheus counters on its probes' ``/metrics``.

The counters are the shard's own :class:`~distconv.sync.ps.state.Stats`, read when a scrape
asks, under names of their own (``distconv_shard_...``): a shard's ``/metrics`` serves them
beside ``distconv_ready`` and ``distconv_step``, and none of a worker's series, which it never
set. The series of the staleness rule (``drops``, ``push_messages_applied``,
``push_messages_dropped``, ``updates_by_staleness``) are an async shard's alone: a sync shard
takes every push, and a 0 served there read as a count.

The scrape runs on the probe server's thread, the counting on the serving loop's. A copy of the
stats made from the scrape's thread could fall in the middle of a request (``push_messages``
counted, its ``updates`` not yet); so a scrape asks, and the loop makes the copy at its next
turn, between two requests (:class:`StatsSnapshots`). While nobody scrapes, the loop pays one
attribute read a turn. The stats are never reset within a shard's life (a new seed, a new run
of the job, count on), so every counter only goes up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric

from distconv.sync.ps.async_updates import TOP_STALENESS
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.state import Stats

#: how long a scrape waits for the loop's next turn (at most a batch of requests, or a tick of
#: 0.1 s, apart); a loop held longer (a long request: a checkpoint part on slow storage) serves
#: its last copy, and ``/healthz`` still says ok until ``--stall-seconds`` have passed
WAIT_SECONDS = 2.0

#: (series, stats field, help) of a shard in either mode
COUNTERS = (
    ("distconv_shard_bytes_in", "bytes_in", "Bytes of the requests this shard received, every "
     "frame after the identity (stats bytes_in)."),
    ("distconv_shard_bytes_out", "bytes_out", "Bytes of the replies this shard sent, every frame "
     "after the identity (stats bytes_out)."),
    ("distconv_shard_push_messages", "push_messages", "Push messages this shard accepted, a "
     "coalesced one carrying several parameters (stats push_messages)."),
    ("distconv_shard_gradients_accepted", "pushes", "Gradients this shard accepted, one per "
     "parameter of an accepted push message, those then dropped as too stale included (stats "
     "pushes)."),
    ("distconv_shard_updates", "updates", "Optimizer updates this shard applied: one per "
     "parameter and step in sync mode, per parameter of an async push applied (stats updates)."),
    ("distconv_shard_update_seconds", "update_seconds", "Seconds this shard spent in the "
     "optimizer and the rank-order sums (stats update_seconds)."),
    ("distconv_shard_errors", "errors", "Requests this shard answered with an error, the held "
     "ones a job failure answered included (stats errors)."),
    ("distconv_shard_refused_connections", "refused_connections", "Connections this shard "
     "refused: a CURVE key not the job's, a peer without CURVE or with another job's server "
     "key, a handshake that ended early (not in the stats reply)."),
)  # fmt: skip
#: (series, stats field, help) of an async shard alone
ASYNC_COUNTERS = (
    ("distconv_shard_stale_gradients_dropped", "drops", "Gradients this shard dropped as more "
     "than max_staleness updates behind, one per parameter of a push (stats drops)."),
    ("distconv_shard_push_messages_applied", "push_messages_applied", "Async push messages of "
     "which this shard applied at least one parameter (stats push_messages_applied)."),
    ("distconv_shard_push_messages_dropped", "push_messages_dropped", "Async push messages of "
     "which this shard dropped every parameter as too stale (stats push_messages_dropped)."),
)  # fmt: skip
#: an async shard's updates by staleness, labelled ``staleness``
BY_STALENESS = (
    "distconv_shard_updates_by_staleness",
    "Async updates this shard applied, by staleness: the updates the parameter's blocks had "
    f"taken since the worker received them (stats updates_by_staleness; '{TOP_STALENESS}+' "
    f"counts every update {TOP_STALENESS} or more stale, where max_staleness is above it).",
)


class StatsSnapshots:
    """Copies of a shard's stats for the scrape's thread, each made by the serving thread
    between two requests (a consistent one) when a scrape asked for it.

    Args:
        take: makes a copy of the stats (``Stats.as_dict``); called on the serving thread alone
            (at construction too, which happens there).
        wait_seconds: how long :meth:`latest` waits for the serving loop's next turn.
    """

    def __init__(self, take: Callable[[], dict[str, Any]], wait_seconds: float = WAIT_SECONDS):
        self._take, self._wait = take, wait_seconds
        self._changed = threading.Condition()
        self._latest = take()
        self._made = 0  # copies made since the first
        self._asked = False
        self._closed = False

    def latest(self) -> dict[str, Any]:
        """The stats as the serving loop's next turn finds them (the scrape's thread): the last
        copy where that turn does not come within the wait, or the loop has ended."""
        with self._changed:
            if not self._closed:
                made, self._asked = self._made, True
                self._changed.wait_for(lambda: self._made > made or self._closed, self._wait)
            return self._latest

    def turn(self) -> None:
        """A turn of the serving loop, between two requests: the copy a scrape asked for."""
        if not self._asked:  # an ask set just after this read is seen at the next turn
            return
        with self._changed:  # held for one copy of a dozen numbers
            self._latest, self._made, self._asked = self._take(), self._made + 1, False
            self._changed.notify_all()

    def close(self) -> None:
        """The serving loop has ended (its thread): the last copy, and no scrape waits again."""
        with self._changed:
            self._latest, self._closed = self._take(), True
            self._changed.notify_all()


class ShardStatsCollector:
    """The ``distconv_shard_...`` counters of one shard, labelled ``role`` and ``rank`` as its
    other series, read from :class:`StatsSnapshots` at each scrape (a Prometheus collector)."""

    def __init__(self, snapshots: StatsSnapshots, role: str, rank: int, config: ShardConfig):
        self._snapshots = snapshots
        self._labels = [role, str(rank)]
        self._async = config.mode == "async"
        self._capped = config.max_staleness > TOP_STALENESS
        self._counters = COUNTERS + (ASYNC_COUNTERS if self._async else ())

    def describe(self) -> list[Metric]:
        """The families without values, for the registry's check of names: the serving loop
        registers this, and a copy of its stats asked of it then would wait for itself."""
        return list(self._families(None))

    def collect(self) -> Iterator[Metric]:
        """The families with the stats of the serving loop's next turn."""
        return self._families(self._snapshots.latest())

    def _families(self, stats: dict[str, Any] | None) -> Iterator[Metric]:
        for name, field, doc in self._counters:
            family = CounterMetricFamily(name, doc, labels=("role", "rank"))
            if stats is not None:
                family.add_metric(self._labels, float(stats[field]))
            yield family
        if not self._async:
            return
        family = CounterMetricFamily(*BY_STALENESS, labels=("role", "rank", "staleness"))
        for staleness, count in enumerate(stats["updates_by_staleness"] if stats else ()):
            family.add_metric([*self._labels, self._staleness(staleness)], float(count))
        yield family

    def _staleness(self, staleness: int) -> str:
        """The label of ``updates_by_staleness[staleness]``: its last entry, where the bound is
        above :data:`TOP_STALENESS`, counts every update that stale or more."""
        top = self._capped and staleness == TOP_STALENESS
        return f"{staleness}+" if top else str(staleness)


def export_stats(
    stats: Stats, config: ShardConfig, service: Any, refused: Callable[[], int] = lambda: 0
) -> StatsSnapshots:
    """Serve ``stats`` (the shard's, of ``config``) on the ``/metrics`` of ``service`` (its
    :class:`~distconv.service.ServiceEndpoints`, labels and all); called on the serving thread.
    ``refused``: the connections the shard refused so far, counted beside its stats (by its
    ZAP handler's thread too: :mod:`~distconv.sync.ps.refused_peers`).
    Returns the snapshots, whose :meth:`~StatsSnapshots.turn` the serving loop calls at each
    turn and :meth:`~StatsSnapshots.close` once it has ended."""
    snapshots = StatsSnapshots(lambda: {**stats.as_dict(), "refused_connections": refused()})
    service.registry.register(ShardStatsCollector(snapshots, service.role, service.rank, config))
    return snapshots
