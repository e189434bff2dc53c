"""A parameter-server timeout names what waited in a user's words, not the shard's keys.

A shard named a held sync push by its own index of the parameter (``sent nothing for step 1
(push:0)``), and a worker named the gather it got no answer to by its tag alone (``no answer
to all_equal:1``). The push is now named by its parameter's name, the gather by what it is,
its tag kept beside the words. Real shard processes, real sockets."""

from __future__ import annotations

import re

import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.sync.errors import SyncError
from distconv.sync.peers import PeerFailed

pytestmark = pytest.mark.timeout(60)


def test_a_push_the_shard_waited_for_is_named_by_its_parameter(shards):
    """Both ranks set up; rank 0 pushes step 1, rank 1 never does: the shard fails the step
    at its timeout naming the push rank 1 did not send by the parameter's name."""
    (endpoint,) = shards.start(1, 2, extra=["--timeout", "1"])
    nets = [small_net(), small_net()]
    syncs = [insecure_worker([endpoint], rank=r, world=2, timeout=10) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2, timeout=30)
        with pytest.raises(PeerFailed) as raised:
            train_steps(nets[0], syncs[0], batches(1, 8), rank=0, world=2)
    finally:
        for sync in syncs:
            sync.close()
    said = str(raised.value)
    names = {p.name for p in nets[0].parameters()}
    found = re.search(r"sent nothing for step 1 \(the push of parameter (\S+)\) within 1 s", said)
    assert found is not None and found.group(1) in names, said
    assert "push:" not in said, said


def test_a_gather_a_worker_got_no_answer_to_is_named_by_what_it_is(shards):
    """The shard waits 2 s for rank 1; rank 0 gives up first (0.75 s): its error names the
    gather as setup's job check, keeping the tag."""
    (endpoint,) = shards.start(1, 2, extra=["--timeout", "2"])
    sync = insecure_worker([endpoint], rank=0, world=2, timeout=0.5)
    try:
        with pytest.raises(SyncError) as raised:
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    said = str(raised.value)
    assert "rank 0: no answer to setup's job check (all_equal:1) from pserver shard(s) 0" in said
