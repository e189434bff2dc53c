"""An error reply with id -1 to a request the worker still awaits stops the worker at once.

A shard answers a request whose header it cannot read with an error reply of id -1: it cannot
say which request that was. The worker only logged such a reply and went on waiting for the
answer, which never comes (the shard answers each request once), for its whole timeout. Where
every reply the shard still owes this worker is to a request awaited (none given up on, whose
late answer this could be), the reply can only be one of theirs: the worker fails at once,
naming the shard and its error text. The shard is a real shard process whose answer to a pull
is replaced by such a reply.
"""

from __future__ import annotations

import time

import pytest
from ps_helpers import insecure_worker, small_net

from distconv.sync.base import SyncError

#: ``python -m distconv`` that answers every pull with an error reply of id -1
UNREADING_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "pull":
        return reply(self, ident, {"id": -1}, (), "header too long (simulated)")
    return reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
def test_an_unreadable_request_of_an_awaited_shard_fails_at_once(shards):
    endpoint = shards.tampered(UNREADING_SHARD)
    sync = insecure_worker([endpoint], timeout=10.0)  # a wait's limit: GRACE x 10 s
    try:
        sync.setup(small_net().parameters())  # rank 0 seeds the fresh shard: no pull
        began = time.monotonic()
        with pytest.raises(SyncError) as failed:
            sync._pull_all()
        waited = time.monotonic() - began
        kept = (dict(sync._rid_shard), dict(sync._replies))
    finally:
        sync.close()
    message = str(failed.value)
    assert f"pserver shard 0 ({endpoint})" in message, message
    assert "could not read" in message and "header too long (simulated)" in message, message
    assert waited < 5.0, f"waited {waited:.1f} s for a request the shard could not read"
    assert kept == ({}, {}), kept  # the wait's requests are given up, nothing kept


@pytest.mark.timeout(60)
def test_an_unreadable_request_given_up_on_does_not_hide_later_ones(shards):
    """The -1 answer to a request given up on clears that request's entry: the worker's next
    request the shard cannot read fails at once. Kept, the entry (matched by id, which the -1
    reply lacks) made every later -1 of the shard look like a late answer for the whole run:
    ignored, and the wait ran to its limit (GRACE x timeout)."""
    endpoint = shards.tampered(UNREADING_SHARD)
    sync = insecure_worker([endpoint], timeout=10.0)
    try:
        sync.setup(small_net().parameters())
        given_up = sync._send(0, {"op": "pull", "blocks": [0]})
        sync._drop_replies({given_up})  # as a wait given up does: its answer, -1, still to come
        began = time.monotonic()
        with pytest.raises(SyncError) as failed:
            sync._pull_all()
        waited = time.monotonic() - began
        left = dict(sync._replies_dropped)
    finally:
        sync.close()
    assert "could not read" in str(failed.value), failed.value
    assert waited < 5.0, f"waited {waited:.1f} s for a request the shard could not read"
    assert given_up not in left, left
