"""A worker's ``--timeout`` may be any positive finite number of seconds (``distconv train``
takes 1e300), but each wait polled ZeroMQ for the whole of what was left of it, in
milliseconds, and a C long holds no 1.5e303: the first hello stopped with an OverflowError
traceback (review k145). A wait now polls in slices of at most an hour."""

from __future__ import annotations

import pytest
from ps_helpers import batches, insecure_worker, small_net, train_steps


@pytest.mark.timeout(60)
def test_a_huge_timeout_trains(shards):
    endpoints = shards.start(1, workers=1)
    net = small_net()
    sync = insecure_worker(endpoints, timeout=1e300)
    try:
        sync.setup(net.parameters())  # OverflowError: Python int too large to convert to C long
        train_steps(net, sync, batches(2, 8))
    finally:
        sync.close()
