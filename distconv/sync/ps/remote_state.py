"""The optimizer state the shards hold for a worker: gathered and restored block by block, and
the shards' own checkpoint parts and counters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from distconv.backend import to_host
from distconv.sync.base import StateDict
from distconv.sync.ps.blocks import rows_view


class RemoteState:
    """The state side of :class:`~distconv.sync.ps.client.PServerSync`."""

    def state_dict(self) -> StateDict:
        """Gather every block's optimizer state from the shards, by parameter name then key."""
        state = {p.name: self.optimizer.init_state(to_host(p.value)) for p in self.params}
        asks = [
            (s, {"op": "get_state", "blocks": [b.id for b in self.layout.blocks_on(s)]}, ())
            for s in range(len(self._socks))
        ]
        for s, (h, arrays) in enumerate(self._ask_all(asks, "get_state")):
            it = iter(arrays)
            for b in self.layout.blocks_on(s):
                for key in h["keys"]:
                    target, a = state[self._specs[b.param].name][key], next(it)
                    if target.ndim == 0:  # a per-parameter scalar (Adam's step): same everywhere
                        target[...] = a
                    else:
                        rows_view(target, self._specs[b.param])[b.start : b.stop] = a
        return state

    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Rank 0 sends ``state`` to the shards (the others have nothing to do)."""
        if not self.is_chief:
            return
        asks = []
        for s in range(len(self._socks)):
            blocks = self.layout.blocks_on(s)
            keys = sorted(state[self.params[blocks[0].param].name]) if blocks else []
            arrays = []
            for b in blocks:
                spec = self._specs[b.param]
                for key in keys:
                    a = np.asarray(to_host(state[spec.name][key]))
                    a = a if a.ndim == 0 else rows_view(a, spec)[b.start : b.stop]
                    arrays.append(np.array(a, order="C"))
            asks.append(
                (s, {"op": "set_state", "blocks": [b.id for b in blocks], "keys": keys}, arrays)
            )
        self._ask_all(asks, "set_state")

    def save_remote_parts(self, step: int) -> dict[str, str]:
        """Ask every shard to write its part of checkpoint ``step``; part name -> path."""
        writers = self._part_writers
        asks = [(s, {"op": "checkpoint", "step": int(step)}, ()) for s in writers]
        replies = self._ask_all(asks, f"checkpoint {step}") if asks else []
        return {f"pserver-shard{s}": h["path"] for s, (h, _) in zip(writers, replies)}

    def shard_stats(self) -> list[dict[str, Any]]:
        """Each shard's counters (pushes, bytes in/out, drops, update seconds, errors)."""
        asks = [(s, {"op": "stats"}, ()) for s in range(len(self._socks))]
        return [h["stats"] for h, _ in self._ask_all(asks, "stats")]
