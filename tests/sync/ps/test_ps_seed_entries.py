"""A seed naming a sparse parameter of shape [] (a scalar has no rows) is refused as malformed,
in one line, instead of failing inside the shard (IndexError, logged as a shard bug with a
traceback); the shard then takes a good seed. In-process shard."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.timeout(60)
def test_a_sparse_scalar_parameter_is_refused_as_malformed(hand):
    h = hand()
    head = {"op": "seed", "optimizer": {"name": "sgd", "lr": 1.0}, "table": [[0, 0, 0, 1]]}
    reply, _ = h.ask({**head, "params": [["s", [], "float64", True]]}, [np.zeros((1, 1))])
    assert reply["op"] == "error", reply
    assert "sparse parameter 's' has shape []: a table needs rows" in reply["error"], reply
    assert h.shard._traced is False  # no failure the checks did not foresee
    reply, _ = h.ask({**head, "params": [["s", [], "float64", False]]}, [np.zeros((1, 1))])
    assert reply["op"] == "ok", reply


@pytest.mark.timeout(60)
def test_a_seed_whose_blocks_share_rows_is_refused_so_parts_cannot_grow_it_past_its_params(hand):
    """Any number of parts could each bring the same rows again under new block ids, and the
    shard kept them all until the last part: memory without bound (review k99 #9). Blocks of a
    parameter may not overlap now, so a seed holds at most the parameters it declares."""
    h = hand()
    head = {"op": "seed", "optimizer": {"name": "sgd", "lr": 1.0}}
    head["params"] = [["w", [8], "float64", False]]
    again = {**head, "parts": 10**9}
    reply, _ = h.ask({**again, "part": 0, "table": [[0, 0, 0, 4]]}, [np.zeros((4, 1))])
    assert reply["op"] == "ok", reply
    reply, _ = h.ask({**again, "part": 1, "table": [[1, 0, 2, 6]]}, [np.zeros((4, 1))])
    assert reply["op"] == "error", reply
    assert "block 1 rows 2:6 of parameter 'w' overlap rows 0:4 already seeded" in reply["error"]
    assert h.shard._seeding is None  # the spoilt seed is dropped, its blocks with it
    # within one part too, in either order
    four, five = np.zeros((4, 1)), np.zeros((5, 1))
    for table, arrays in [
        ([[0, 0, 4, 8], [1, 0, 0, 5]], [four, five]),
        ([[0, 0, 0, 5], [1, 0, 4, 8]], [five, four]),
    ]:
        reply, _ = h.ask({**head, "table": table}, arrays)
        assert reply["op"] == "error" and "overlap rows" in reply["error"], reply
    # rows that touch but do not overlap, over two parts, seed the shard
    two = {**head, "parts": 2}
    reply, _ = h.ask({**two, "part": 0, "table": [[0, 0, 4, 8]]}, [np.full((4, 1), 2.0)])
    assert reply["op"] == "ok", reply
    reply, _ = h.ask({**two, "part": 1, "table": [[1, 0, 0, 4]]}, [np.ones((4, 1))])
    assert reply["op"] == "ok", reply
    assert sorted((b.start, b.stop, b.value[0, 0]) for b in h.shard.blocks.values()) == [
        (0, 4, 1.0),
        (4, 8, 2.0),
    ]
    assert h.shard._traced is False
