"""An async refresh's skip after a push the shard applied but did not count.

A refresh with no step of its own since its last pull skips the pull where each shard's stats
are those it recorded then. The version it compared was the shard's count of pushes, which a
shard adds to only after the push's reply has gone: a push whose blocks were updated and whose
reply then failed (the reply's copy of the values out of memory) moved the values, counted
nothing and failed nothing, and another rank's refresh kept its old copy. The shard's count of
updates is added to where the values change. A real shard process, its push reply made to fail
once.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import (
    batches,
    insecure_worker,
    run_ranks,
    shard_argv,
    shard_values,
    small_net,
    train_steps,
)

from distconv.sync.base import SyncError

#: a shard whose first ok reply to a push raises, as a reply's copy out of memory would
FAILING_REPLY = """
from distconv.cli import main
from distconv.sync.ps.server import Shard

reply, failed = Shard._reply, []

def once(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "push" and error is None and not failed:
        failed.append(True)
        raise MemoryError("the reply's copy of the values")
    return reply(self, ident, request, arrays, error, **fields)

Shard._reply = once
raise SystemExit(main())
"""


def start_shard_failing_a_reply(shards, workers: int) -> str:
    """One async shard (``FAILING_REPLY``) on 127.0.0.1, stopped by the ``shards`` fixture."""
    return shards.launch(
        shard_argv(["-c", FAILING_REPLY], workers=workers, mode="async"),
        shards.tmp_path / "failing.log",
    )


@pytest.mark.timeout(90)
def test_a_refresh_pulls_a_push_applied_whose_reply_failed(shards):
    endpoint = start_shard_failing_a_reply(shards, workers=2)
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2, lr=0.1) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)  # rank 1 pulls here
        pulled = {p.name: p.value.copy() for p in nets[1].parameters()}
        with pytest.raises(SyncError, match="MemoryError"):
            train_steps(nets[0], syncs[0], batches(1, 8), 0, 2)  # applied, its reply failed
        trained = shard_values([endpoint])
        syncs[1].refresh_parameters()  # no step of its own since its pull
        held = {p.name: p.value for p in nets[1].parameters()}
    finally:
        for s in syncs:
            s.close()
    assert not all(np.array_equal(pulled[n], v) for n, v in trained.items())  # the push moved
    for name, value in trained.items():
        np.testing.assert_array_equal(held[name], value, name)
