"""``shard_stats`` checks each shard's reply for its counters: a reply without ``stats`` raised
a bare ``KeyError: 'stats'`` naming no shard, and one whose ``stats`` was no map went to the
caller as it came, to fail where its counts were read. Such a reply is refused as malformed,
naming the shard. The shard is a real shard process whose ``stats`` replies are tampered with;
a worker asks for stats before any hello, as the shards allow."""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker, shard_argv

from distconv.sync.base import SyncError

#: ``python -m distconv`` whose stats replies have no ``stats`` (argv[1] ``none``) or a number
#: there (``number``)
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

fault = sys.argv.pop(1)
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "stats" and "stats" in fields:
        if fault == "none":
            del fields["stats"]
        else:
            fields["stats"] = 7
    return reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fault", ["none", "number"])
def test_a_stats_reply_without_its_counters_is_refused_naming_its_shard(shards, tmp_path, fault):
    endpoint = shards.launch(shard_argv(["-c", TAMPERED_SHARD, fault]), tmp_path / "shard.log")
    sync = insecure_worker([endpoint], timeout=10)
    try:
        with pytest.raises(SyncError) as refused:
            sync.shard_stats()
    finally:
        sync.close()
    said = str(refused.value)
    want = "rank 0: malformed reply from a pserver: stats reply without its counters (a map)"
    assert said == f"{want} (pserver shard 0 ({endpoint}))", said


@pytest.mark.timeout(60)
def test_the_refusal_names_the_shard_whose_reply_it_was(shards, tmp_path):
    """Shard 0 answers as it should, shard 1 without its counters: shard 1 is named, not the
    first shard asked."""
    good = shards.launch(shard_argv(["-m", "distconv"], shards=2), tmp_path / "shard0.log")
    argv = shard_argv(["-c", TAMPERED_SHARD, "none"], shard=1, shards=2)
    bad = shards.launch(argv, tmp_path / "shard1.log")
    sync = insecure_worker([good, bad], timeout=10)
    try:
        with pytest.raises(SyncError) as refused:
            sync.shard_stats()
    finally:
        sync.close()
    said = str(refused.value)
    assert said.endswith(f"(a map) (pserver shard 1 ({bad}))"), said
