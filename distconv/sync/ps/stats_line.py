"""A shard's stats line in its log: its counters (docs/protocol.md, "Stats"), logged where
they moved, and again only now and then where they did not."""

from __future__ import annotations

import json
import logging
import math
import time
from typing import Any

from distconv.sync.ps.state import Stats

log = logging.getLogger("distconv.pserver")

#: how often counters that stayed as their last line said go to the log again, in seconds: an
#: idle shard's line every 30 s was 0.8 MB a day; once an hour still dates the log of a shard
#: kept up between jobs for one who reads nothing else (/healthz and /metrics are the liveness
#: signals, where it serves them)
STATS_UNCHANGED_EVERY = 3600.0


class StatsLine:
    """Logs shard ``index``'s stats line, remembering what the last one said and when."""

    def __init__(self, index: int) -> None:
        self.index = index
        self._said: dict[str, Any] | None = None
        self._said_at = -math.inf  # (monotonic) none yet: the first periodic line is logged

    def log(self, stats: Stats) -> None:
        """Log ``stats`` whatever the last line said (a shard's exit says its counters)."""
        self._say(stats.as_dict())

    def log_if_news(self, stats: Stats, now: float) -> None:
        """The periodic line: logged where a counter moved since the last one, or where
        :data:`STATS_UNCHANGED_EVERY` seconds passed since it (``now``: monotonic)."""
        counters = stats.as_dict()  # one copy, compared and then logged
        if now - self._said_at >= STATS_UNCHANGED_EVERY or counters != self._said:
            self._say(counters)

    def _say(self, counters: dict[str, Any]) -> None:
        self._said, self._said_at = counters, time.monotonic()
        log.info("shard %d stats %s", self.index, json.dumps(counters))
