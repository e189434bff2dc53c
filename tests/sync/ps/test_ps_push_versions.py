"""A push's ``versions`` are the versions the worker last received, so none is below 0 or
ahead of its block's: async mode reads its staleness as the difference, and a version from
ahead (of another seed, or made up) was read as no staleness at all: a push stale by any
number of updates was applied. Refused now, naming the block, and nothing is applied."""

from __future__ import annotations

import numpy as np
import pytest
from hand_shard import BLOCKS, ROWS


def _push(step: int, versions: list[int]) -> tuple[dict, list[np.ndarray]]:
    head = {"op": "push", "step": step, "count": 1, "lr": 1.0, "params": [0]}
    head.update(blocks=list(range(BLOCKS)), versions=versions)
    return head, [np.ones((ROWS, 1))] * BLOCKS  # sgd, lr 1, gradient 1: w - 1 each update


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_version_the_shard_never_sent_is_refused(hand, mode):
    h = hand(mode=mode, max_staleness=1)
    h.seed()
    for step in (1, 2, 3):  # the blocks' versions are 3 now
        reply, _ = h.ask(*_push(step, [step - 1] * BLOCKS))
        assert reply["op"] == "ok" and reply["versions"] == [step] * BLOCKS, reply
    for versions in ([0, 0, 10**6, 0], [3, 3, 3, 4], [3, -1, 3, 3]):
        reply, _ = h.ask(*_push(4, versions))
        # was (async): applied as if fresh, staleness 3 - 10**6 < 1; (sync): taken too
        assert reply["op"] == "error", reply
        assert "this shard's is 3: not a version it sent" in reply["error"], reply
        for b in (h.shard.blocks[i] for i in range(BLOCKS)):  # w's
            assert b.version == 3
            np.testing.assert_array_equal(b.value, -3.0)
    assert h.shard.stats.pushes == 3 and h.shard.stats.updates == 3
    reply, (values,) = h.ask(*_push(4, [3] * BLOCKS))  # the worker's own versions still go
    assert reply["op"] == "ok" and reply["versions"] == [4] * BLOCKS, reply
    np.testing.assert_array_equal(values.view(np.float64), -4.0)


@pytest.mark.timeout(60)
def test_an_async_push_stale_past_the_bound_is_still_dropped(hand):
    h = hand(mode="async", max_staleness=1)
    h.seed()
    for step in (1, 2):
        assert h.ask(*_push(step, [step - 1] * BLOCKS))[0]["op"] == "ok"
    reply, (values,) = h.ask(*_push(3, [0] * BLOCKS))  # 2 updates stale, bound 1
    assert reply["op"] == "ok" and reply["dropped"] == 1, reply
    np.testing.assert_array_equal(values.view(np.float64), -2.0)
