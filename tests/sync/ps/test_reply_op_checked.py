"""A reply's ``op`` is ``"ok"`` or ``"error"``, and an error reply says why: any other is
refused as malformed, naming the shard (review k341).

The worker read a reply as an error only where its ``op`` was ``"error"``, and as an answer
otherwise: a reply of ``op`` ``"busy"`` (another service's, a shard's bug) was written as the
values asked for, and an error reply without its ``error`` text stopped the worker with
``pserver HOST:PORT: None``. The shard is a real shard process whose pull replies are tampered
with.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, shard_argv, small_net

from distconv.sync.base import SyncError

#: ``python -m distconv`` whose replies to pulls are tampered with (argv[1]): ``busy``, op
#: "busy"; ``mute``, an error reply without its error text
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

fault = sys.argv.pop(1)
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "pull":
        fields["op"] = "busy" if fault == "busy" else "error"
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""
CAUSES = {"busy": "reply op 'busy', not 'ok' or 'error'", "mute": "an error reply without"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fault", sorted(CAUSES))
def test_a_reply_of_another_op_is_refused(shards, tmp_path, fault):
    endpoint = shards.launch(shard_argv(["-c", TAMPERED_SHARD, fault]), tmp_path / "shard.log")
    net = small_net()
    sync = insecure_worker([endpoint])
    try:
        sync.setup(net.parameters())
        for p in net.parameters():
            p.value[...] = 7.0  # what a pull written would overwrite
        with pytest.raises(SyncError) as refused:
            sync._pull_all()
        after = {p.name: p.value.copy() for p in net.parameters()}
    finally:
        sync.close()
    said = str(refused.value)
    assert said.startswith("rank 0: malformed reply from a pserver: "), said
    assert CAUSES[fault] in said, said
    assert said.endswith(f" (pserver shard 0 ({endpoint}))"), said
    for name, value in after.items():
        np.testing.assert_array_equal(value, 7.0, name)
