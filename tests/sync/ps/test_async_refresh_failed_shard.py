"""An async refresh with no step since its last pull, on a shard whose job failed.

Such a refresh asks each shard's ``stats`` and pulls nothing where no push count moved. A failed
shard still answers ``stats`` (monitoring reads it), and a failure need not move the count: a
rank lost (silent for the shard's ``--timeout``), or a push whose update failed midway (some
blocks updated, none counted). The refresh then returned with this rank's old copy, where a
pull would have been refused with the failure. Real shard process.
"""

from __future__ import annotations

import time

import pytest
from ps_helpers import insecure_worker, run_ranks, small_net

from distconv.sync.base import SyncError

SHARD_TIMEOUT = 2.0


def failed(sync) -> str | None:
    """The failure shard 0's ``stats`` reply reports, if any."""
    ((header, _),) = sync._ask_all([(0, {"op": "stats"}, ())], "stats")
    return header.get("failed")


@pytest.mark.timeout(60)
def test_a_refresh_on_a_failed_shard_says_so(shards):
    (endpoint,) = shards.start(1, 2, mode="async", extra=["--timeout", str(SHARD_TIMEOUT)])
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)  # rank 1 pulls here
        syncs[0]._stop_heartbeat()  # the chief gone without a word: lost at the timeout
        deadline = time.monotonic() + 10 * SHARD_TIMEOUT
        while failed(syncs[1]) is None:
            assert time.monotonic() < deadline, "the shard did not fail the job"
            time.sleep(0.2)
        with pytest.raises(SyncError, match="rank 1, pull: pserver .*rank 0.* silent"):
            syncs[1].refresh_parameters()
    finally:
        syncs[1].close()
        syncs[0]._close_sockets()
