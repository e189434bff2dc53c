"""A pull's reply must hold what was asked: the rows a prefetch asked for, whole blocks for a
pull of every block.

A reply was checked against itself only: its ``rows`` counts against its own ids and values.
So a prefetch reply that left out a row asked for (the count said one less) wrote the others
and left that row as it was, stale, without a word; and a pull of every block answered with a
few rows wrote those rows, took the blocks' new versions, and left the rest stale. The shard
is a real shard process whose replies to rank 0's pulls are tampered with (``fault``).

So may a dense push's reply not list rows: it was checked for fitting its blocks
only, since a sparse push's reply may carry other rows than pushed (in sync mode the union of
the ranks'), so a dense push answered with a few rows wrote those, took the blocks' new
versions and left the rest of each block stale, without a word.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import assert_malformed_reply, insecure_worker, run_ranks, shard_argv

from distconv.parameter import Parameter
from distconv.sync.base import SyncError

#: ``python -m distconv`` whose replies to rank 0's pulls are of other rows (argv[1]): ``fewer``,
#: a prefetch's last row (of the last block with rows) left out; ``rows``, a pull of whole
#: blocks answered with their first rows
TAMPERED_SHARD = """
import sys
import numpy as np
from distconv.cli import main
from distconv.sync.ps.handlers import RequestHandlers

fault = sys.argv.pop(1)
pull = RequestHandlers._op_pull

def tampered(self, ident, header, arrays):
    if header.get("rank") != 0 or ("rows" in header) != (fault == "fewer"):
        return pull(self, ident, header, arrays)
    reply = self._reply
    def bad(ident, request, out=(), error=None, **fields):
        if fault == "fewer":
            k = max(k for k, n in enumerate(fields["rows"]) if n)  # a block with rows
            out = [*out[: 2 * k], out[2 * k][:-1], out[2 * k + 1][:-1], *out[2 * k + 2 :]]
            fields["rows"][k] -= 1
        else:
            blocks = [self.blocks[b] for b in header["blocks"]]
            out = [a for b in blocks for a in (np.array([b.start]), b.value[:1])]
            fields["rows"] = [1] * len(blocks)
        reply(ident, request, out, error, **fields)
    self._reply = bad
    try:
        pull(self, ident, header, arrays)
    finally:
        del self._reply

RequestHandlers._op_pull = tampered
raise SystemExit(main(sys.argv[1:]))
"""
ROWS = np.array([1, 2, 3])


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fault", ["fewer", "rows"])
def test_a_reply_of_other_rows_than_asked_is_refused(shards, tmp_path, fault):
    endpoint = shards.launch(
        shard_argv(["-c", TAMPERED_SHARD, fault], workers=2, mode="async"), tmp_path / "shard.log"
    )
    tables = [Parameter("table", np.zeros((8, 2))) for _ in range(2)]
    for t in tables:
        t.sparse_rows = True
    syncs = [insecure_worker([endpoint], r, 2, lr=1.0, timeout=10) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup([tables[r]]), 2)
        syncs[1].start_step(1)  # rank 1 moves the rows on the shard
        syncs[1].prefetch({"table": ROWS})
        tables[1].grad[ROWS] = 1.0
        syncs[1].on_gradient(tables[1])
        syncs[1].finish_step()
        with pytest.raises(SyncError) as refused:
            syncs[0].prefetch({"table": ROWS}) if fault == "fewer" else syncs[0]._pull_all()
        untouched = tables[0].value.copy()
    finally:
        for s in syncs:
            s.close()
    cause = "rows of block 0: not the 3 asked for" if fault == "fewer" else "rows where whole"
    assert_malformed_reply(refused.value, cause, endpoint)
    np.testing.assert_array_equal(untouched, 0.0)  # nothing of the reply was written


#: ``python -m distconv`` whose replies to pushes of whole blocks list each block's first row
ROWS_FOR_A_PUSH_SHARD = """
import sys
import numpy as np
from distconv.cli import main
from distconv.sync.ps.server import Shard

reply = Shard._reply

def rows_reply(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "push" and not error and "rows" not in fields:
        blocks = [self.blocks[b] for b in request["blocks"]]
        arrays = [a for b in blocks for a in (np.array([b.start]), b.value[:1].reshape(1, -1))]
        fields["rows"] = [1] * len(blocks)
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = rows_reply
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
def test_a_dense_push_answered_with_rows_is_refused(shards, tmp_path):
    endpoint = shards.launch(shard_argv(["-c", ROWS_FOR_A_PUSH_SHARD]), tmp_path / "shard.log")
    weight = Parameter("w", np.zeros((4, 2)))
    sync = insecure_worker([endpoint], lr=1.0, timeout=10)
    try:
        sync.setup([weight])
        sync.start_step(1)
        weight.grad[...] = 1.0
        sync.on_gradient(weight)
        with pytest.raises(SyncError) as refused:
            sync.finish_step()
        untouched = weight.value.copy()
    finally:
        sync.close()
    assert_malformed_reply(refused.value, "rows where whole blocks were asked for", endpoint)
    np.testing.assert_array_equal(untouched, 0.0)  # nothing of the reply was written
