"""A reply carrying the id of another shard's request is not taken as that shard's answer
(commit dc60e0b's case that its own test left out).

Replies were matched by id alone, so shard 1 sending a reply with the id of the request before
its own (shard 0's: a worker numbers its requests in one sequence, and asks the shards in
turn) had it taken as shard 0's answer, or, where shard 0's answer came first, kept in the
reply table for the rest of the run (and shard 0's later one too). The shards are real shard
processes; shard 1's replies to stats and pulls also go out with the id before theirs.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, shard_argv, shard_values, small_net

#: ``python -m distconv`` whose replies to stats and pulls go first with the id before theirs
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") in ("stats", "pull"):
        reply(self, ident, {**request, "id": request["id"] - 1}, arrays, error, **fields)
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
def test_a_reply_with_another_shards_request_id_is_ignored(shards, tmp_path):
    endpoints = [
        shards.launch(shard_argv(["-m", "distconv"], shard=0, shards=2), tmp_path / "s0.log"),
        shards.launch(shard_argv(["-c", TAMPERED_SHARD], shard=1, shards=2), tmp_path / "s1.log"),
    ]
    net = small_net()
    sync = insecure_worker(endpoints)
    try:
        sync.setup(net.parameters())
        for _ in range(3):
            sync._pull_all()  # stats to shard 0, then 1; pulls to shard 0, then 1
        assert len(sync.shard_stats()) == 2  # a later request: every stray read by now
        kept = dict(sync._replies)
        values = {p.name: p.value.copy() for p in net.parameters()}
    finally:
        sync.close()
    assert not kept, sorted(kept)
    for name, value in shard_values(endpoints).items():
        np.testing.assert_array_equal(values[name], value, name)
