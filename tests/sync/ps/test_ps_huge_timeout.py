"""A worker's ``--timeout`` may be any positive finite number of seconds (``distconv train``
takes 1e300), but each wait polled ZeroMQ for the whole of what was left of it, in
milliseconds, and a C long holds no 1.5e303: the first hello stopped with an OverflowError
traceback. A wait now polls in slices of at most an hour."""

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


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 0.0, -1.0])
@pytest.mark.timeout(30)
def test_a_timeout_that_is_no_number_of_seconds_is_refused_at_once(timeout):
    """NaN passed ``timeout <= 0`` and the first wait's poll stopped setup with "cannot
    convert float NaN to integer"; infinity waited for ever where the user asked for a limit."""
    with pytest.raises(ValueError, match="timeout must be a positive finite number of seconds"):
        insecure_worker(["127.0.0.1:1"], timeout=timeout)
