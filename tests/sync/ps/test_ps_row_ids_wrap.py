"""Row ids that wrap around int64: ``[0, 2**63 - 1, -2**63, -1, 5]`` has every
``np.diff`` positive (the second and third wrap), and its first and last ids lie in the block,
so the check passed them; the update then indexed row ``2**63 - 1`` and the IndexError failed
the whole job (sync and async), and a pull of them got a "shard error" with a traceback. Such
ids are refused as not increasing, and the shard goes on serving."""

from __future__ import annotations

import numpy as np
import pytest
from hand_shard import BLOCKS, TABLE_LEN

from distconv.sync.ps.wire import WireError, check_row_ids

WRAPPED = np.array([0, 2**63 - 1, -(2**63), -1, 5], np.int64)


def test_ids_that_wrap_around_int64_are_not_increasing():
    with pytest.raises(WireError, match="increase strictly"):
        check_row_ids(WRAPPED, len(WRAPPED), 0, 2048, "block 4")
    check_row_ids(np.array([0, 5, 2047], np.int64), 3, 0, 2048, "block 4")  # still taken


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_push_or_pull_of_wrapped_row_ids_is_refused_and_the_job_goes_on(hand, mode):
    h = hand(mode=mode)
    h.seed()
    n = len(WRAPPED)
    head, _ = h.ask({"op": "pull", "blocks": [BLOCKS], "rows": [n]}, [WRAPPED])
    assert head["op"] == "error" and "increase strictly" in head["error"], head
    push = {"op": "push", "step": 0, "count": 1, "lr": 0.1, "params": [1], "blocks": [BLOCKS]}
    push.update(versions=[0], rows=[n])
    head, _ = h.ask(push, [WRAPPED, np.ones((n, TABLE_LEN))])
    assert head["op"] == "error" and "increase strictly" in head["error"], head
    # nothing was updated, and the job has not failed: a good push is still applied
    ids = np.array([3, 7], np.int64)
    head, arrays = h.ask({**push, "rows": [2]}, [ids, np.ones((2, TABLE_LEN))])
    assert head["op"] == "ok", head
    np.testing.assert_array_equal(arrays[0], ids)
    np.testing.assert_array_equal(arrays[1], ids[:, None] - 0.1 * np.ones((2, TABLE_LEN)))
    stats, _ = h.ask({"op": "stats"})
    assert stats["failed"] is None and stats["stats"]["errors"] == 2
