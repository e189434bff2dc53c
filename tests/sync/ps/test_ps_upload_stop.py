"""An upload that stops is named within a quarter limit of the limit.

A shard answers a ``set_state`` (a resume), a seed or a push only once all of it arrived, so
while it takes the worker's bytes in it is heard from by the count of bytes it acknowledged
(``links.py``), which a wait read once per poll: and a wait with nothing else to look at
polled for the whole limit. A shard that stopped right after the wait's first read (the ACK
of the last bytes it took comes after it: Linux delays ACKs up to 40 ms) was then seen to
have taken them at the second read, a limit later, and was named two limits after its last
byte. A wait now reads its links at least four times a limit. Real shard, SIGSTOPped; no look
at its process (as for a shard on another host, which a wait cannot see end).
"""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest
from ps_helpers import insecure_worker, small_net

from distconv.sync.base import SyncError
from distconv.sync.ps.channel import GRACE

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a link's bytes are read with Linux's TCP_INFO"
)

TIMEOUT = 2.0  # the wait's limit is GRACE x this


@pytest.mark.timeout(90)
@pytest.mark.parametrize("attempt", range(3))  # the ACK's delay decides: three tries
def test_a_shard_that_stops_taking_a_set_state_in_is_named_near_the_limit(shards, attempt):
    (endpoint,) = shards.start(1, workers=1, extra=["--timeout", "60"])
    net = small_net()
    sync = insecure_worker([endpoint], timeout=TIMEOUT, optimizer="adam")
    try:
        sync.setup(net.parameters())
        state = sync.state_dict()
        sync._shard_processes = None  # a shard on another host: its process is not seen
        os.kill(shards.procs[0].pid, signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(SyncError, match="no answer to set_state from pserver shard"):
            sync.load_state_dict(state)
        took = time.monotonic() - start
    finally:
        os.kill(shards.procs[0].pid, signal.SIGCONT)
        sync.close()
    limit = GRACE * TIMEOUT
    assert limit <= took < 1.25 * limit + 0.3, f"named after {took:.2f} s, the limit {limit} s"
