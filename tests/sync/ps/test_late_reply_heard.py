"""A healthy shard's late reply to a request given up keeps a retry's wait alive.

Commit 161882f stopped counting the bytes of a reply to nothing awaited as a sign of life, so
that a shard sending only such replies is named. It counted a late reply to a request given up
(a pull that timed out, then asked again) the same: once that reply, large and crossing a slow
link for longer than the wait's limit, was read, the wait fell back to its own start and named
a live shard as silent, while the answer it waited for was already crossing behind it. The
shard is a real shard process behind a :class:`SlowLink` whose first pull is answered late.
"""

from __future__ import annotations

import socket

import pytest
from ps_helpers import insecure_worker, shard_argv, small_net
from test_pull_allowance_slow_link import BLOCK_BYTES, HIDDEN, RATE, SlowLink

from distconv.sync.base import SyncError

#: ``python -m distconv`` whose first pull is answered after SECONDS (argv[1]), later ones at once
LATE_FIRST_PULL = """
import sys, time
from distconv.cli import main
from distconv.sync.ps.handlers import RequestHandlers

seconds, pull, asked = float(sys.argv.pop(1)), RequestHandlers._op_pull, []

def late_first(self, ident, header, arrays):
    asked.append(header)
    if len(asked) == 1:
        time.sleep(seconds)
    pull(self, ident, header, arrays)

RequestHandlers._op_pull = late_first
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(120)
@pytest.mark.skipif(not socket.__dict__.get("TCP_INFO"), reason="Linux's TCP_INFO reads a link")
def test_a_late_reply_to_a_pull_given_up_keeps_the_retry_alive(shards, tmp_path):
    # the first pull is silent for 1 s, past the wait's limit (GRACE x 0.5 s): given up; its
    # reply (~27 MB, ~1.4 s on the link) then crosses while the retry waits, its own behind it
    shard = shards.launch(shard_argv(["-c", LATE_FIRST_PULL, "1.0"]), tmp_path / "shard.log")
    link = SlowLink(shard, RATE)
    net = small_net(hidden=HIDDEN)
    sync = insecure_worker([link.endpoint], block_bytes=BLOCK_BYTES, timeout=0.5)
    try:
        sync.setup(net.parameters())  # rank 0 seeds the fresh shard: no pull
        with pytest.raises(SyncError, match="no answer to pull"):
            sync._pull_all()
        sync._pull_all()  # the retry: the late reply is dropped, its own is written
        assert not sync._replies and not sync._replies_dropped
    finally:
        sync.close()
        link.close()
