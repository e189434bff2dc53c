"""A sync sparse step's reply to the chief carries the union of every rank's rows:
two pushes each within the shard's ``max_message_bytes`` made a reply over it, which was
refused as a malformed reply, after the shard had applied the step. The step now fails the job
before any update, naming the sizes, and every rank's reply says so within the cap. Another
rank's reply carries only the rows it pushed."""

from __future__ import annotations

import numpy as np
from hand_shard import BLOCKS, TABLE_LEN, TABLE_ROWS

from distconv.sync.ps.wire import unpack_arrays, unpack_header

#: a cap the seed's largest part (the 640 KiB table) fits, and each push's 1,000 rows (328 KB),
#: but not their union (656 KB)
CAP = 655_500


def _two_pushes(hand, *rows_of_rank):
    """A seeded shard capped at CAP, and one sync sparse push of each rank's rows (gradient 1)."""
    h = hand(workers=2, max_message_bytes=CAP)
    h.seed()
    for rank, ids in enumerate(rows_of_rank):
        head = {"op": "push", "rank": rank, "step": 0, "count": 1, "lr": 0.1, "params": [1]}
        head.update(blocks=[BLOCKS], versions=[0], rows=[len(ids)])
        h.send(head, [ids.astype(np.int64), np.ones((len(ids), TABLE_LEN))])
    return h


def test_a_union_of_rows_over_the_cap_fails_the_step_before_any_update(hand):
    h = _two_pushes(hand, np.arange(0, 1000), np.arange(1000, 2000))
    for _ in range(2):  # each rank's reply, read as a worker reads it: within the cap
        frames = h.client.recv_multipart()
        reply = unpack_header(frames[0], request=False)
        unpack_arrays(reply, frames[1:], CAP)
        assert reply["op"] == "error", reply
        assert "reply of 656000 bytes" in reply["error"] and str(CAP) in reply["error"], reply
    assert h.shard.failed and "max_message_bytes" in h.shard.failed
    table = h.shard.blocks[BLOCKS].value  # row r still holds r: nothing was applied
    np.testing.assert_array_equal(table[:, 0], np.arange(TABLE_ROWS, dtype=np.float64))


def test_a_union_within_the_cap_is_applied_and_answered(hand):
    h = _two_pushes(hand, np.arange(0, 900), np.arange(900, 1900))
    # the replies, in rank order: the chief's carries both ranks' rows, rank 1's its own
    for rows in (np.arange(1900), np.arange(900, 1900)):
        frames = h.client.recv_multipart()
        reply = unpack_header(frames[0], request=False)
        ids, values = unpack_arrays(reply, frames[1:], CAP)
        assert reply["op"] == "ok" and reply["rows"] == [len(rows)], reply
        np.testing.assert_array_equal(ids, rows)
        # lr 0.1 on the sum of one gradient per row, over the 2 examples of the step
        np.testing.assert_allclose(values[:, 0], rows - 0.05)
    assert not h.shard.failed
