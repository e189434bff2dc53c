"""A reply's block versions are counts, from 0: a negative one is refused before the reply is
written, naming the shard.

The worker took any integer: a reply of version -1 was written, its version kept, and sent
back in the next push, which the shard then refused (``push: block 0 version -1 ... not a
version it sent``), blaming the worker's push for its own reply. The shard is a real shard
process whose pull replies are tampered with.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import assert_malformed_reply, pull_refused

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
def test_a_negative_version_is_refused_before_writing(shards):
    endpoint = shards.tampered(TAMPERED_SHARD)
    refused, after, versions = pull_refused(endpoint)
    assert_malformed_reply(refused, "versions must be integers from 0", endpoint)
    assert min(versions) >= 0, versions
    for name, value in after.items():
        np.testing.assert_array_equal(value, 7.0, name)
