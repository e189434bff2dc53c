"""A shard that sends only replies to no awaited request is named after the wait's limit, not
waited on for good.

A wait counts a shard as heard while bytes keep arriving on its connection (the kernel's
``TCP_INFO``: a large reply still crossing). The bytes of an ignored reply counted too, so a
shard that never answered the request awaited but sent a stray reply (an id never sent, say) more
often than the wait's limit kept the worker waiting for as long as it went on. The shard is a
real shard process whose reply to a pull is replaced by stray replies, one every 0.2 s.
"""

from __future__ import annotations

import time

import pytest
from ps_helpers import insecure_worker, shard_argv, small_net

from distconv.sync.base import SyncError

#: ``python -m distconv`` that answers a pull with no answer, but with SECONDS of stray replies
TAMPERED_SHARD = """
import sys, time
from distconv.cli import main
from distconv.sync.ps.server import Shard

seconds = float(sys.argv.pop(1))
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") != "pull":
        return reply(self, ident, request, arrays, error, **fields)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        reply(self, ident, {**request, "id": 2**40}, (), "stray")  # an id never sent
        time.sleep(0.2)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
def test_a_shard_sending_only_stray_replies_is_named_within_the_limit(shards, tmp_path):
    endpoint = shards.launch(shard_argv(["-c", TAMPERED_SHARD, "30"]), tmp_path / "shard.log")
    sync = insecure_worker([endpoint], timeout=1.0)  # a wait's limit: GRACE x 1 s
    try:
        sync.setup(small_net().parameters())  # rank 0 seeds the fresh shard: no pull
        began = time.monotonic()
        with pytest.raises(SyncError, match=r"no answer to .* from pserver shard\(s\) 0 "):
            sync._pull_all()  # the pull is never answered
        waited = time.monotonic() - began
    finally:
        sync.close()
        # its handler sends strays for 30 s, deaf to the teardown's SIGTERM (10 s of CI)
        shards.procs[-1].kill()
    assert waited < 10, f"waited {waited:.1f} s while strays came every 0.2 s"
