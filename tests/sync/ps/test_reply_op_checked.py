"""A reply's ``op`` is ``"ok"`` or ``"error"``, and an error reply says why: any other is
refused as malformed, naming the shard.

The worker read a reply as an error only where its ``op`` was ``"error"``, and as an answer
otherwise: a reply of ``op`` ``"busy"`` (another service's, a shard's bug) was written as the
values asked for, and an error reply without its ``error`` text stopped the worker with
``pserver HOST:PORT: None``. The shard is a real shard process whose pull replies are tampered
with.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import assert_malformed_reply, pull_refused

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
def test_a_reply_of_another_op_is_refused(shards, fault):
    endpoint = shards.tampered(TAMPERED_SHARD, fault)
    refused, after, _ = pull_refused(endpoint)
    assert_malformed_reply(refused, CAUSES[fault], endpoint)
    for name, value in after.items():
        np.testing.assert_array_equal(value, 7.0, name)
