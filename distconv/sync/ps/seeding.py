"""A seed as it arrives at a shard, in parts: the blocks received so far, checked so that a
seed holds no more than the parameters it declares."""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from distconv.messages import SENT_ERROR_CHARS, one_line
from distconv.optim import OPTIMIZERS, optimizer_from_config
from distconv.sync.ps.job_hello import REFUSED_JOB
from distconv.sync.ps.shard_optimizer import SHARD_REGISTRY
from distconv.sync.ps.state import _Block, _param_spec, _table_entry
from distconv.sync.ps.wire import WireError, check_rows, short


class Seeding:
    """A seed arriving in parts: what part 0 set, and the blocks received so far.

    Blocks of one parameter may not share rows. So the values a seed accumulates before its
    last part never exceed the parameters its header declares, however many parts it claims.
    What it declares is rank 0's word: a shard trusts the holder of rank 0's key with that
    much memory (and with a block's bookkeeping per block: 1-row blocks cost more than rows).
    """

    def __init__(self, header: dict[str, Any], parts: int) -> None:
        self.params_wire = header["params"]
        self.config = header["optimizer"]
        self.params = [_param_spec(p) for p in header["params"]]
        self.optimizer = seed_optimizer(header["optimizer"])
        self.parts = parts
        self.next = 0
        self.blocks: dict[int, _Block] = {}
        #: per parameter, the (start, stop) row ranges its blocks hold, sorted
        self._spans: dict[int, list[tuple[int, int]]] = {}

    def add(self, table: list, arrays: list) -> None:
        """One part's blocks: ``table`` entries ``[id, param, start, stop]`` and their arrays.

        Raises:
            WireError: an entry is malformed, an id repeats, rows overlap rows already held,
                or an array's shape or dtype is not its block's. The seed is then spoilt: the
                shard drops it, and rank 0 starts again from part 0.
        """
        entries = [_table_entry(e, self.params) for e in table]
        if not entries:
            raise WireError("seed: no blocks")
        ids = [e[0] for e in entries]
        if len(set(ids)) != len(ids) or set(ids) & self.blocks.keys():
            raise WireError("seed: block ids repeat")
        if len(arrays) != len(entries):
            raise WireError(f"seed: {len(arrays)} arrays for {len(entries)} blocks")
        for (bid, p, start, stop), value in zip(entries, arrays):
            check_rows(value, self.params[p], stop - start, f"block {bid}")
        for bid, p, start, stop in entries:
            self._take_rows(bid, p, start, stop)
        for (bid, p, start, stop), value in zip(entries, arrays):
            copy = np.array(value)
            self.blocks[bid] = _Block(p, start, stop, copy, self.optimizer.init_state(copy))

    def _take_rows(self, bid: int, p: int, start: int, stop: int) -> None:
        spans = self._spans.setdefault(p, [])
        at = bisect.bisect(spans, (start, stop))
        before = spans[at - 1] if at else None
        after = spans[at] if at < len(spans) else None
        if (before and before[1] > start) or (after and after[0] < stop):
            held = before if before and before[1] > start else after
            raise WireError(
                f"seed: block {bid} rows {start}:{stop} of parameter "
                f"{self.params[p].name!r} overlap rows {held[0]}:{held[1]} already seeded"
            )
        spans.insert(at, (start, stop))


def seed_optimizer(config: dict[str, Any]) -> Any:
    """The shard's optimizer from a seed's config, or a WireError saying what is wrong, in one
    line cut short: the config is received text, up to a header's MiB (quoted whole, the error
    reply passed the header cap, and rank 0 could not read why). A name this install does not
    know refuses the job (the worker raises ``JobRefused``), saying where the shards build
    optimizers from."""
    name = config.get("name", "")  # a missing one is named below
    if type(name) is not str:  # an int once failed in create_optimizer, on name.lower()
        raise WireError(f"optimizer config: name {short(name)} is not a string")
    try:
        return optimizer_from_config(config)
    except (ValueError, TypeError) as exc:
        said = f"optimizer config: {one_line(str(exc), SENT_ERROR_CHARS)}"
        if "name" not in config or name.lower() in OPTIMIZERS:
            raise WireError(said) from None
        refusal = WireError(f"{said}; {SHARD_REGISTRY}")
        refusal.fields = REFUSED_JOB  # the reply's: the worker's configuration, not a bug
        raise refusal from None
