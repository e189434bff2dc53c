"""Async mode's push on a shard: each parameter applied on arrival, or dropped when its blocks
moved on by more than ``--max-staleness`` updates since the worker last received them (the
staleness rule), the first drop logged at INFO and the rest counted.

What the stats count of it (docs/protocol.md, "Stats"): ``drops``, one per parameter dropped;
``updates_by_staleness``, one per parameter applied, at its staleness; and per push message,
``push_messages_applied`` where the shard applied at least one of its parameters (the push
moved the model; its other parameters, if any, are in ``drops``) and
``push_messages_dropped`` where it dropped every one. A push of ``count`` 0 applies nothing:
dropped whole, it counts in ``push_messages_dropped``; else in neither (its parameters over the
bound, if any, in ``drops``).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from distconv.messages import named
from distconv.optim import mean_scale
from distconv.sync.ps import state
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.state import _Refused
from distconv.sync.ps.sums import nan_message

log = logging.getLogger("distconv.pserver")
DROPS_COUNTED = "; further drops are counted in the stats line (drops), logged at DEBUG"
#: the highest staleness ``updates_by_staleness`` counts apart: a bound above it ("never
#: drop") counts every update this stale or more in this last entry, so that a stats reply
#: and the log line stay short
TOP_STALENESS = 64


def staleness_counts(config: ShardConfig) -> list[int]:
    """A shard's ``updates_by_staleness`` before any push: a zero for each staleness from 0 to
    its ``max_staleness`` (at most :data:`TOP_STALENESS`) in async mode, none in sync mode."""
    if config.mode != "async":
        return []
    return [0] * (min(config.max_staleness, TOP_STALENESS) + 1)


class AsyncUpdates:
    """The async side of :class:`~distconv.sync.ps.server.Shard`'s optimizer
    (:class:`~distconv.sync.ps.state.BlockUpdates` the rest): check a push finite, apply or
    drop each of its parameters, answer it.

    The clock and the finiteness check are :mod:`.state`'s names, looked up there at each
    call: a test that drives one drives the shard's in both modes.
    """

    def _check_finite(self, rank: int, ids: list[int], parts: list) -> None:
        """Refuse an async push holding a NaN or Inf, naming its parameter and rank."""
        with np.errstate(over="ignore"):  # the check's dot product may overflow: see all_finite
            bad = next((k for k, (_, g) in enumerate(parts) if not state.all_finite(g)), None)
        if bad is not None:
            raise _Refused(nan_message(self.params[self.blocks[ids[bad]].param].name, rank))

    def _apply_async(self, ident: bytes, header: dict[str, Any], params: list, parts: list) -> None:
        """Apply each parameter of a push at once, or drop it if too stale; one reply with
        every block's values and the number of parameters dropped. A push of ``count`` 0 (a
        short last step left the worker no example) holds no gradient: nothing is applied
        (Momentum and Adam would take a step on its zeros, a step of no data).

        Everything a request can get wrong was checked before (:meth:`_op_push`) and the drops
        are decided here before any update, so only the optimizer itself can fail midway (a
        shard bug, or memory): some blocks may be updated then, so the job fails, as in sync.
        """
        at, applied = 0, []
        for p in params:
            ids = self.by_param[p]
            mine, at = slice(at, at + len(ids)), at + len(ids)
            staleness = max(
                self.blocks[b].version - v for b, v in zip(ids, header["versions"][mine])
            )
            if staleness <= self.config.max_staleness:
                applied.append((p, ids, parts[mine], staleness))
                continue
            self.stats.drops += 1  # INFO for each was 352 lines an epoch at staleness 0
            first, updates = self.stats.drops == 1, "update" + "s" * (staleness != 1)
            log.log(
                logging.INFO if first else logging.DEBUG,
                "shard %d: dropped a push of %s from rank %d: %d %s stale (max %d)%s",
                *(self.index, self.params[p].name, header["rank"], staleness, updates),
                *(self.config.max_staleness, DROPS_COUNTED * first),
            )
        self.optimizer.lr = float(header["lr"])
        scale = mean_scale(header["count"])
        for p, ids, mine, staleness in applied if header["count"] else ():
            try:
                start = state._clock()
                for bid, (rows, g) in zip(ids, mine):
                    self._update(self.blocks[bid], g, scale, rows)
                self.stats.update_seconds += state._clock() - start
            except Exception as exc:
                log.exception("shard %d: async update of parameter %d failed", self.index, p)
                message = (
                    f"update of parameter {self.params[p].name} from rank {header['rank']} "
                    f"failed on shard {self.index}: {named(exc)}"
                )
                self._fail(message)
                raise _Refused(message) from None
            self.stats.updates += 1
            counts = self.stats.updates_by_staleness
            counts[min(staleness, len(counts) - 1)] += 1
            self.top_step = max(self.top_step, header["step"])
        if not applied:
            self.stats.push_messages_dropped += 1
        elif header["count"]:
            self.stats.push_messages_applied += 1
        arrays, fields = self._values(header["blocks"], [rows for rows, _ in parts])
        self._reply(ident, header, arrays, dropped=len(params) - len(applied), **fields)
