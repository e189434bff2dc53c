"""Async mode applies a step's push of a parameter once, as sync mode does: the same push
again (a replay), or one of an earlier step of the same rank, was applied again, counted as
another update; it is refused now, naming the parameter and both steps, and changes nothing.
A rank's ``hello`` (a new worker, whose steps start again) or a new seed starts afresh."""

from __future__ import annotations

import numpy as np
import pytest
from hand_shard import BLOCKS, ROWS, TABLE_LEN

from distconv.sync.ps.job_hello import hello_fields


def _push(step: int, versions: int) -> tuple[dict, list[np.ndarray]]:
    head = {"op": "push", "step": step, "count": 1, "lr": 1.0, "params": [0]}
    head.update(blocks=list(range(BLOCKS)), versions=[versions] * BLOCKS)
    return head, [np.ones((ROWS, 1))] * BLOCKS  # sgd, lr 1, gradient 1: w - 1 each update


def _w(h) -> list[float]:
    return sorted({float(v) for b in range(BLOCKS) for v in h.shard.blocks[b].value.ravel()})


@pytest.mark.timeout(60)
def test_an_async_push_of_a_step_pushed_already_is_refused(hand):
    h = hand(mode="async", max_staleness=10)
    h.seed()
    assert h.ask(*_push(1, 0))[0]["op"] == "ok"
    for step, versions in ((1, 1), (0, 1)):  # the same step again, an earlier one
        reply, _ = h.ask(*_push(step, versions))
        assert reply["op"] == "error", reply  # was: "ok", w -2 then -3
        assert f"pushed parameter w for step {step} after its push for step 1" in reply["error"]
        assert _w(h) == [-1.0]
    assert (h.shard.stats.pushes, h.shard.stats.updates) == (1, 1)
    # another parameter of that step is its own: the table's rows 3 and 4, gradient 1
    head = {"op": "push", "step": 1, "count": 1, "lr": 1.0, "params": [1], "blocks": [BLOCKS]}
    sparse = [np.array([3, 4]), np.ones((2, TABLE_LEN))]
    assert h.ask({**head, "versions": [0], "rows": [2]}, sparse)[0]["op"] == "ok"
    np.testing.assert_array_equal(h.shard.blocks[BLOCKS].value[3:5, 0], [2.0, 3.0])
    reply, (values,) = h.ask(*_push(2, 1))  # the next step goes
    assert reply["op"] == "ok", reply
    np.testing.assert_array_equal(values.view(np.float64), -2.0)


@pytest.mark.timeout(60)
def test_a_new_worker_of_the_rank_or_a_new_seed_starts_its_steps_again(hand):
    h = hand(mode="async", max_staleness=10)
    h.seed()
    assert h.ask(*_push(5, 0))[0]["op"] == "ok"
    hello = {"op": "hello", "host": "h", "run": 2, **hello_fields({"name": "job"})}
    assert h.ask(hello)[0]["op"] == "ok"  # a restarted worker: its step 1 is new
    reply, (values,) = h.ask({**_push(1, 1)[0], "run": 2}, _push(1, 1)[1])
    assert reply["op"] == "ok", reply
    np.testing.assert_array_equal(values.view(np.float64), -2.0)
    h.seed()  # w = 0 again: a new run's seed
    reply, (values,) = h.ask({**_push(1, 0)[0], "run": 2}, _push(1, 0)[1])
    assert reply["op"] == "ok", reply
    np.testing.assert_array_equal(values.view(np.float64), -1.0)
