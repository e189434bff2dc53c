"""A rank that stalls in one step (a page-in, a collector's pause, a noisy neighbour): the
other ranks of a synchronous or allreduce job wait for it in that step's exchange."""

from __future__ import annotations

import time
from typing import Any

from distconv.trainer import Trainer

#: the step the stalled rank sleeps in: not a stop check's (every 8), nor an epoch's last
STALLED_STEP = 3


class StalledTrainer(Trainer):
    """A Trainer that sleeps ``stall`` seconds before its step :data:`STALLED_STEP`."""

    stall = 0.0

    def train_step(self, arrays: Any, passes: Any) -> Any:
        if self.pos.step + 1 == STALLED_STEP:
            time.sleep(self.stall)
        return super().train_step(arrays, passes)


def assert_the_stalled_rank_waited_least(line: dict, stalled: int, stall: float) -> None:
    """``line`` (an epoch's metrics) shows the others' wait for rank ``stalled``'s ``stall``
    seconds in their steps' exchange, and rank ``stalled`` as the one that waited least."""
    exchanges = line["sync_seconds_per_rank"]
    others = [w for r, w in enumerate(exchanges) if r != stalled]
    assert len(exchanges) == len(line["collective_seconds_per_rank"]), line
    assert min(others) > 0.8 * stall > 2 * exchanges[stalled], line
    totals = [s + c for s, c in zip(exchanges, line["collective_seconds_per_rank"])]
    assert min(range(len(totals)), key=totals.__getitem__) == stalled, line
