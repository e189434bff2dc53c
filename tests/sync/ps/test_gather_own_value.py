"""A gather's answer must hold, at this rank's place, the value this rank sent.

Shard 0 answers a ``values`` gather (barrier, all_equal) with each live rank's value as that
rank sent it (``null`` for a rank lost), so a worker's own place holds its own value. The
worker did not check that: an all_equal answer giving this rank ``null`` (lost) passed the job
check with no description compared at all, and one giving it another digest, the same as every
other rank's, failed setup with a bare StopIteration from ``check_all_equal``'s ``next()``,
naming no shard. The shard is a real shard process whose gather replies are tampered with.
"""

from __future__ import annotations

import pytest
from ps_helpers import assert_malformed_reply, insecure_worker, small_net

from distconv.sync.base import SyncError

#: ``python -m distconv`` whose answers to all_equal give rank 0 (argv[1]) ``lost``: null;
#: ``changed``: another digest
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

fault = sys.argv.pop(1)
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if "values" in fields and request.get("tag", "").startswith("all_equal"):
        fields["values"][0] = None if fault == "lost" else "0123456789abcdef"
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fault", ["lost", "changed"])
def test_an_answer_without_this_ranks_own_value_names_shard_0(shards, fault):
    endpoint = shards.tampered(TAMPERED_SHARD, fault)
    sync = insecure_worker([endpoint])
    try:
        with pytest.raises(SyncError) as refused:
            sync.setup(small_net().parameters())  # gathers all_equal:1, barrier:2
    finally:
        sync.close()
    assert_malformed_reply(refused.value, "all_equal:1 answered", endpoint, leads=True)
    assert "rank 0's value is not the one it sent" in str(refused.value)


@pytest.mark.timeout(60)
def test_a_barrier_and_a_job_check_of_two_ranks_pass(shards):
    """Every rank's own value comes back at its place: a healthy 2-rank setup passes."""
    from ps_helpers import run_ranks

    endpoints = shards.start(1, workers=2)

    def rank_fn(rank: int) -> None:
        sync = insecure_worker(endpoints, rank=rank, world=2)
        try:
            sync.setup(small_net().parameters())
            sync.barrier()
        finally:
            sync.close()

    run_ranks(rank_fn, 2)
