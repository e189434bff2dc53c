"""How an async push of no example (``count`` 0, a short last step) counts in a shard's stats:
it applies nothing, so it never counts in ``push_messages_applied``; dropped whole, it counts in
``push_messages_dropped``; partly dropped, its dropped parameters count in ``drops`` and the
push in neither. So ``push_messages`` is ``push_messages_applied + push_messages_dropped`` plus
the pushes of no example not dropped whole (docs/protocol.md, "Stats"), not plus those that
dropped nothing: a push of no example partly dropped is in neither."""

from __future__ import annotations

import numpy as np
import pytest
from hand_shard import BLOCKS, ROWS, TABLE_LEN, TABLE_ROWS

COUNTS = ("push_messages", "push_messages_applied", "push_messages_dropped", "drops", "updates")


def _push(step: int, params: list[int], versions: list[int], count: int = 1):
    """A dense push of the hand shard's ``w`` (parameter 0, blocks 0-3) and/or ``t`` (1, block
    4), each block sent at its ``versions`` entry."""
    blocks = [b for p in params for b in (range(BLOCKS) if p == 0 else [BLOCKS])]
    arrays = [
        np.ones((ROWS, 1)) if b < BLOCKS else np.ones((TABLE_ROWS, TABLE_LEN)) for b in blocks
    ]
    head = {"op": "push", "step": step, "count": count, "lr": 1.0, "params": params}
    return {**head, "blocks": blocks, "versions": versions}, arrays


def _counts(h) -> tuple:
    stats = h.ask({"op": "stats"})[0]["stats"]
    return tuple(stats[k] for k in COUNTS), stats["updates_by_staleness"]


@pytest.mark.timeout(60)
def test_a_push_of_no_example_counts_as_dropped_only_when_dropped_whole(hand):
    h = hand(mode="async", max_staleness=1)
    h.seed()
    for step in (1, 2, 3):  # t's block moves on to version 3; w's stay at 0
        assert h.ask(*_push(step, [1], [step - 1]))[0]["dropped"] == 0
    assert _counts(h) == ((3, 3, 0, 0, 3), [3, 0])
    # no example: w fresh, t 3 updates stale (bound 1): t dropped, nothing applied
    assert h.ask(*_push(4, [0, 1], [0] * BLOCKS + [0], count=0))[0]["dropped"] == 1
    assert _counts(h) == ((4, 3, 0, 1, 3), [3, 0])  # in neither, its drop in drops
    # no example, every parameter over the bound: dropped whole
    assert h.ask(*_push(5, [1], [1], count=0))[0]["dropped"] == 1
    assert _counts(h) == ((5, 3, 1, 2, 3), [3, 0])
    # no example within the bound: in neither, nothing in drops
    assert h.ask(*_push(6, [0], [0] * BLOCKS, count=0))[0]["dropped"] == 0
    (messages, applied, dropped, _, _), _ = _counts(h)
    assert (messages, applied, dropped) == (6, 3, 1)
    assert messages == applied + dropped + 2  # the two of no example not dropped whole
