"""A reply is taken only as the answer to a request of its own shard that is still awaited;
any other is ignored, as docs/protocol.md says, and not kept.

Replies were matched by id alone, whatever socket they came on and whether a request of that
id had been sent yet. So a reply carrying the id of a request not sent yet (a shard's bug: the
id of its request plus one) was kept and taken later as the answer to whatever request got that
id, which then failed as malformed although its own shard answered it well (or, where the
forms agreed, was written as if it were that request's); a reply of another shard's request
was taken for that shard's; and a second reply to a request already answered stayed in the
worker's reply table for the rest of the run. The shard is a real shard process whose replies
are tampered with.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, shard_values, small_net

#: ``python -m distconv`` whose replies to pulls are tampered with (argv[1]): ``ahead``, a copy
#: with the id after the pull's goes first; ``twice``, the reply goes twice
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

fault = sys.argv.pop(1)
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "pull":
        stray = {**request, "id": request["id"] + (fault == "ahead")}
        reply(self, ident, stray, arrays, error, **fields)
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fault", ["ahead", "twice"])
def test_a_reply_to_no_awaited_request_of_its_shard_is_ignored(shards, fault):
    endpoint = shards.tampered(TAMPERED_SHARD, fault)
    net = small_net()
    sync = insecure_worker([endpoint])
    try:
        sync.setup(net.parameters())
        for _ in range(3):  # each pull's stray reply arrives before the next request's answer
            sync._pull_all()  # a stats request, then the pull
        assert len(sync.shard_stats()) == 1  # a later request: every stray reply read by now
        kept = dict(sync._replies)
        values = {p.name: p.value.copy() for p in net.parameters()}
    finally:
        sync.close()
    assert not kept, sorted(kept)
    for name, value in shard_values([endpoint]).items():
        np.testing.assert_array_equal(values[name], value, name)
