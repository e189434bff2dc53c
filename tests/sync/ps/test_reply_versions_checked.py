"""A reply's block versions are counts, from 0: a negative one is refused before the reply is
written, naming the shard (review k341).

The worker took any integer: a reply of version -1 was written, its version kept, and sent
back in the next push, which the shard then refused (``push: block 0 version -1 ... not a
version it sent``), blaming the worker's push for its own reply. The shard is a real shard
process whose pull replies are tampered with.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, shard_argv, small_net

from distconv.sync.base import SyncError

#: ``python -m distconv`` whose pull replies say every block's version is -1
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "pull" and "versions" in fields:
        fields["versions"] = [-1] * len(fields["versions"])
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
def test_a_negative_version_is_refused_before_writing(shards, tmp_path):
    endpoint = shards.launch(shard_argv(["-c", TAMPERED_SHARD]), tmp_path / "shard.log")
    net = small_net()
    sync = insecure_worker([endpoint])
    try:
        sync.setup(net.parameters())
        for p in net.parameters():
            p.value[...] = 7.0  # what a pull written would overwrite
        with pytest.raises(SyncError) as refused:
            sync._pull_all()
        versions = list(sync._versions)
    finally:
        sync.close()
    said = str(refused.value)
    assert said.startswith("rank 0: malformed reply from a pserver: "), said
    assert "versions must be integers from 0" in said, said
    assert said.endswith(f" (pserver shard 0 ({endpoint}))"), said
    assert min(versions) >= 0, versions
    for p in net.parameters():
        np.testing.assert_array_equal(p.value, 7.0, p.name)
