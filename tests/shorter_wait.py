"""A worker beside shards that may outwait it, set up alone: what the worker's own tests of
its shorter-wait warning and the manifest check's comparison with that warning share."""

from __future__ import annotations

import logging

import pytest

from distconv.sync.base import SyncError
from tests.sync.ps.ps_helpers import insecure_worker, shorter_wait_warnings, small_net


def warned_at_setup_alone(
    endpoint: str, timeout: float, caplog: pytest.LogCaptureFixture
) -> list[str]:
    """Rank 0 of a two-worker job (``timeout=``) sets up on the real shard at ``endpoint``;
    rank 1 never comes, so the setup raises ``SyncError``. The warnings it logged that it
    waits less for a shard's reply than the shard waits for every worker
    (:func:`~tests.sync.ps.ps_helpers.shorter_wait_warnings`)."""
    sync = insecure_worker([endpoint], rank=0, world=2, timeout=timeout)
    caplog.set_level(logging.WARNING, "distconv.pserver")
    try:
        with pytest.raises(SyncError):  # rank 1 never comes
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    return shorter_wait_warnings(caplog)
