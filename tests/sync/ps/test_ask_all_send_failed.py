"""Requests sent before a send failed are given up, not left awaited for good.

``_ask_all`` sends one request to each shard, then waits for them all. Where a send failed
(a shard that takes no message: ZeroMQ dropped its connection, or it reads nothing), the
requests already sent to the other shards stayed awaited with no wait left for them: their
replies, answers of live shards, were kept in the reply table for the rest of the run (a pull's
each as large as its blocks). The shards are real shard processes; the failed send is shard
1's, made to fail as ``_send_frames`` fails past its patience.
"""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker, small_net

from distconv.sync.base import SyncError


@pytest.mark.timeout(60)
def test_the_requests_sent_before_a_failed_send_are_given_up(shards, monkeypatch):
    endpoints = shards.start(2, workers=1)
    sync = insecure_worker(endpoints)
    try:
        sync.setup(small_net().parameters())
        send = sync._send_frames

        def shard_1_takes_nothing(shard, *args):
            if shard == 1:
                raise SyncError("rank 0: pserver shard 1 took no message for 0 s (test)")
            return send(shard, *args)

        with monkeypatch.context() as failing:
            failing.setattr(sync, "_send_frames", shard_1_takes_nothing)
            with pytest.raises(SyncError, match="shard 1 took no message"):
                sync._pull_all()  # its stats went to shard 0, not to shard 1
        sync._pull_all()  # shard 0's answer to that stats came first on its link
        left = dict(sync._replies), dict(sync._rid_shard), dict(sync._replies_dropped)
    finally:
        sync.close()
    assert left == ({}, {}, {}), left
