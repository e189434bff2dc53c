"""A seed naming a sparse parameter of shape [] (a scalar has no rows) is refused as malformed,
in one line, instead of failing inside the shard (IndexError, logged as a shard bug with a
traceback); the shard then takes a good seed. In-process shard."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.sync.ps.seeding import Seeding
from distconv.sync.ps.wire import WireError


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
    shard kept them all until the last part: memory without bound. Blocks of a
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


@pytest.mark.parametrize(
    "spans, overlap",
    [
        ([(0, 4), (4, 8)], None),  # as the client cuts them: adjacent, ascending, in one part
        ([(4, 8), (0, 4), (8, 9)], None),
        ([(0, 4), (0, 4)], (0, 4)),  # identical
        ([(0, 8), (2, 4)], (0, 8)),  # contained
        ([(2, 4), (0, 8)], (2, 4)),  # containing
        ([(0, 4), (0, 2)], (0, 4)),  # the same start
        ([(4, 8), (0, 2), (1, 3)], (0, 2)),
        ([(0, 2), (6, 8), (3, 4), (3, 7)], (3, 4)),
        # held in arrival order, not sorted, the ranges would let (7, 10) past (6, 8)
        ([(6, 8), (0, 2), (7, 10)], (6, 8)),
    ],
)
def test_the_seed_finds_every_overlap_of_a_parameters_rows_whatever_the_order(spans, overlap):
    """The neighbours of a sorted list of ranges: adjacent ranges (as the client cuts a
    parameter) pass in either order; identical, contained and containing ranges do not."""
    seeding = Seeding(
        {"params": [["w", [10], "float64", False]], "optimizer": {"name": "sgd", "lr": 1.0}}, 9
    )
    *first, (start, stop) = spans
    for bid, (a, b) in enumerate(first):
        seeding.add([[bid, 0, a, b]], [np.zeros((b - a, 1))])
    last = [[len(first), 0, start, stop]], [np.zeros((stop - start, 1))]
    if overlap is None:
        seeding.add(*last)
        assert sorted((b.start, b.stop) for b in seeding.blocks.values()) == sorted(spans)
        return
    with pytest.raises(
        WireError, match=rf"rows {start}:{stop} .* overlap rows {overlap[0]}:{overlap[1]} "
    ):
        seeding.add(*last)


@pytest.mark.timeout(60)
def test_a_refused_seed_part_drops_the_seed_in_progress(hand):
    """docs/protocol.md: "a part out of order, or a refused one, drops the seed in progress".
    A part refused for params or an optimizer other than part 0's kept it, and the same part
    sent again carried on from there. Another rank's seed, refused as such,
    leaves rank 0's alone."""
    h = hand(workers=2)
    head = {"op": "seed", "optimizer": {"name": "sgd", "lr": 1.0}, "parts": 3}
    head["params"] = [["w", [12], "float64", False]]
    four = np.zeros((4, 1))
    reply, _ = h.ask({**head, "part": 0, "table": [[0, 0, 0, 4]]}, [four])
    assert reply["op"] == "ok", reply
    reply, _ = h.ask({**head, "rank": 1, "part": 1, "table": [[1, 0, 4, 8]]}, [four])
    assert "only rank 0 seeds the shards" in reply["error"], reply
    assert h.shard._seeding is not None and h.shard._seeding.next == 1
    other = {**head, "optimizer": {"name": "sgd", "lr": 2.0}}
    reply, _ = h.ask({**other, "part": 1, "table": [[1, 0, 4, 8]]}, [four])
    assert "params or optimizer differ from part 0" in reply["error"], reply
    assert h.shard._seeding is None
    reply, _ = h.ask({**head, "part": 1, "table": [[1, 0, 4, 8]]}, [four])
    assert reply["error"] == "seed part 1 of 3 out of order (expected None)", reply
    assert not h.shard.blocks


@pytest.mark.timeout(60)
def test_a_seed_part_refused_before_its_checks_or_by_a_shard_error_drops_the_seed(
    hand, monkeypatch
):
    """docs/protocol.md's "a refused one drops the seed in progress" held only for _op_seed's
    own checks: a part refused for its arrays (over the shard's
    message cap) or answered with a shard error (out of memory copying its blocks) kept the
    seed, and the part sent again carried on to a whole seed. A part of rank 0's run before,
    refused as such, leaves the seed of now alone."""
    h = hand(workers=2, max_message_bytes=40)
    h.ask({"op": "hello", "run": 7, "host": "h", "digest": "0" * 16})
    head = {"op": "seed", "optimizer": {"name": "sgd", "lr": 1.0}, "parts": 3, "run": 7}
    head["params"] = [["w", [12], "float64", False]]
    four = np.zeros((4, 1))
    reply, _ = h.ask({**head, "part": 0, "table": [[0, 0, 0, 4]]}, [four])
    assert reply["op"] == "ok", reply
    stale = {**head, "run": 6, "part": 1, "table": [[1, 0, 4, 8]]}
    reply, _ = h.ask(stale, [four])
    assert "of the run before, refused" in reply["error"], reply
    assert h.shard._seeding is not None and h.shard._seeding.next == 1
    reply, _ = h.ask({**head, "part": 1, "table": [[1, 0, 4, 12]]}, [np.zeros((8, 1))])
    assert "holds 64 bytes, more than the 40 of --max-message-bytes" in reply["error"], reply
    assert h.shard._seeding is None
    reply, _ = h.ask({**head, "part": 1, "table": [[1, 0, 4, 8]]}, [four])
    assert reply["error"] == "seed part 1 of 3 out of order (expected None)", reply

    reply, _ = h.ask({**head, "part": 0, "table": [[0, 0, 0, 4]]}, [four])
    assert reply["op"] == "ok", reply

    def out_of_memory(self, table, arrays):
        raise MemoryError("copying the blocks")

    with monkeypatch.context() as m:
        m.setattr(Seeding, "add", out_of_memory)
        reply, _ = h.ask({**head, "part": 1, "table": [[1, 0, 4, 8]]}, [four])
    assert reply["error"] == "shard error: MemoryError: copying the blocks", reply
    assert h.shard._seeding is None
    reply, _ = h.ask({**head, "part": 1, "table": [[1, 0, 4, 8]]}, [four])
    assert reply["error"] == "seed part 1 of 3 out of order (expected None)", reply
    assert not h.shard.blocks
