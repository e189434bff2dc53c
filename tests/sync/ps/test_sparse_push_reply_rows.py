"""A sparse push's reply must list the rows pushed.

Its rows were checked for fitting their blocks only (ids inside, values of the table's shape
and dtype), since in sync mode the reply carries the union of the ranks' rows. So a reply that
left out a row the worker pushed wrote the others and left that row as it was before the
update, stale, without a word; in async mode, where the reply is of the rows pushed alone, one
that listed another row wrote it; and one of whole blocks (no ``rows``) was taken as such.
The shard is a real shard process whose replies to sparse pushes are tampered with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from ps_helpers import assert_malformed_reply, insecure_worker, shard_argv

from distconv.parameter import Parameter
from distconv.sync.base import SyncError

#: ``python -m distconv`` whose replies to sparse pushes are tampered with (argv[1]):
#: ``fewer``, the last row of the last block with rows left out; ``other``, row 0 of the first
#: block added (the test pushes rows 1 to 3); ``whole``, the blocks' whole values frame
TAMPERED_SHARD = """
import sys
import numpy as np
from distconv.cli import main
from distconv.sync.ps.server import Shard

fault = sys.argv.pop(1)
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "push" and "rows" in fields:
        counts = fields["rows"]
        if fault == "fewer":
            k = max(k for k, n in enumerate(counts) if n)
            arrays = [*arrays[: 2 * k], arrays[2 * k][:-1], arrays[2 * k + 1][:-1],
                      *arrays[2 * k + 2 :]]
            counts[k] -= 1
        elif fault == "other":
            block = self.blocks[request["blocks"][0]]
            ids = np.concatenate([[block.start], arrays[0]]).astype(np.int64)
            arrays = [ids, block.value[ids - block.start], *arrays[2:]]
            counts[0] += 1
        else:
            arrays = [self.store.frame(request["blocks"]).copy()]
            del fields["rows"]
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""
ROWS = np.array([1, 2, 3])
#: (fault, mode) -> what the error says: async replies with the rows pushed alone, sync with
#: the union of the ranks' rows, which must hold them
CAUSES = {
    ("fewer", "async"): "rows of block 0: not the 3 pushed",
    ("fewer", "sync"): "rows of block 0: row 3 was pushed, the reply leaves it out",
    ("other", "async"): "rows of block 0: not the 3 pushed",
    ("whole", "sync"): "whole blocks where rows were asked for",
}


def _push_rows(endpoint: str, finish: Callable[[Any], object]) -> tuple[object, np.ndarray]:
    """One step of a worker that pushes the gradient 1.0 of ``ROWS`` of an 8-row sparse table
    (zeros) to ``endpoint``: what ``finish(sync)`` returns, with the table's values after."""
    table = Parameter("table", np.zeros((8, 2)))
    table.sparse_rows = True
    sync = insecure_worker([endpoint], lr=1.0, timeout=10)
    try:
        sync.setup([table])
        sync.start_step(1)
        sync.prefetch({"table": ROWS})
        table.grad[ROWS] = 1.0
        sync.on_gradient(table)
        return finish(sync), table.value.copy()
    finally:
        sync.close()


def _refused_finish(sync) -> tuple[SyncError, list[int]]:
    with pytest.raises(SyncError) as refused:
        sync.finish_step()
    return refused.value, list(sync._versions)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("fault", "mode"), sorted(CAUSES))
def test_a_sparse_push_reply_of_other_rows_is_refused(shards, fault, mode):
    """In sync mode too a reply must hold every row pushed (among the other ranks' rows)."""
    endpoint = shards.tampered(TAMPERED_SHARD, fault, mode=mode)
    (refused, versions), untouched = _push_rows(endpoint, _refused_finish)
    assert_malformed_reply(refused, CAUSES[fault, mode], endpoint)
    np.testing.assert_array_equal(untouched, 0.0)  # nothing of the reply was written
    assert versions == [0] * len(versions)


@pytest.mark.timeout(60)
def test_a_sparse_push_reply_of_the_rows_pushed_is_written(shards, tmp_path):
    """The same shard, untampered in async mode: the rows pushed come back, updated."""
    endpoint = shards.launch(shard_argv(["-m", "distconv"], mode="async"), tmp_path / "s.log")
    _, values = _push_rows(endpoint, lambda sync: sync.finish_step())
    want = np.zeros((8, 2))
    want[ROWS] = -1.0  # SGD, lr 1, one example: value - grad
    np.testing.assert_array_equal(values, want)
