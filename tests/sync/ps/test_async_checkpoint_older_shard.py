"""An async checkpoint against a shard of a release before ``get_state``'s ``with_values``
names what is wrong (review k319).

A shard ignores header fields it does not know, so one of an older release answers the async
chief's ``get_state`` with the state alone. The worker failed at its first checkpoint, after
an epoch of training, with ``malformed reply from a pserver: 0 versions for 5 blocks``, which
says neither what was missing nor why. It now says the values asked for are missing, as an
older shard answers, and to run workers and shards of the same release. The stand-in for the
older shard is a real shard process whose ``get_state`` handler drops the field first.
"""

from __future__ import annotations

import sys

import pytest
from ps_helpers import insecure_worker, small_net

from distconv.sync.base import SyncError

#: ``python -m distconv`` with a get_state handler that does not know ``with_values``
OLDER_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.handlers import RequestHandlers

current = RequestHandlers._op_get_state

def older(self, ident, header, arrays):
    header.pop("with_values", None)
    current(self, ident, header, arrays)

RequestHandlers._op_get_state = older
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
def test_an_older_shard_that_ignores_with_values_is_named_as_one(shards, tmp_path):
    cmd = [sys.executable, "-c", OLDER_SHARD, "pserver", "--bind", "127.0.0.1:0", "--shard", "0",
           "--num-shards", "1", "--workers", "1", "--mode", "async", "--insecure",
           "--drain-seconds", "0"]  # fmt: skip
    endpoint = shards.launch(cmd, tmp_path / "older-shard.log")
    sync = insecure_worker([endpoint], optimizer="adam", timeout=10)
    try:
        sync.setup(small_net().parameters())
        with pytest.raises(SyncError) as raised:
            sync.state_dict()
    finally:
        sync.close()
    said = str(raised.value)
    assert "get_state reply without the values it was asked for (with_values)" in said, said
    assert "run workers and shards of the same release" in said, said
    assert said.endswith(f"(pserver shard 0 ({endpoint}))"), said
