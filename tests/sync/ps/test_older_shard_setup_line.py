"""The worker's setup line against a shard that does not say its staleness bound (an older
shard's hello has no ``max_staleness``): it said "(async mode, max staleness None)"; it says
nothing of staleness then. The shard is a real one serving in a thread, its hello
without the field."""

from __future__ import annotations

import logging
import threading

import pytest
from ps_helpers import insecure_worker, small_net

from distconv.sync.description import sync_scheme
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard


@pytest.mark.timeout(60)
def test_a_shard_that_says_no_bound_gets_no_staleness_in_the_setup_line(monkeypatch, caplog):
    settings = Shard._settings

    def older(self):
        return {k: v for k, v in settings(self).items() if k != "max_staleness"}

    monkeypatch.setattr(Shard, "_settings", older)
    shard = Shard(ShardConfig(bind="127.0.0.1:0", mode="async", insecure=True, timeout=30))
    endpoint = shard.bind()
    loop = threading.Thread(target=shard.serve, daemon=True)
    loop.start()
    sync = insecure_worker([endpoint])
    try:
        with caplog.at_level(logging.INFO, logger="distconv.pserver"):
            sync.setup(small_net().parameters(), {})
        assert sync_scheme(sync) == {"sync": "pserver", "mode": "async"}
    finally:
        sync.close()
        shard.stop()
        loop.join(10)
        shard.close()
    assert "blocks on 1 shards (async mode)" in caplog.text, caplog.text
