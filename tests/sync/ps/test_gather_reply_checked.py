"""A gather's reply is checked before it is used, and a wrong one names shard 0.

The worker took shard 0's answer to a gather as it came: an allreduce's ``sum`` was checked
for its length only, so a sum holding ``null`` or a string failed in ``float()`` with a bare
TypeError or ValueError naming no shard, and one holding ``true`` was summed as 1.0; a
barrier's or all_equal's reply without its ``values`` list failed ``setup`` with
``'NoneType' object is not iterable``, and one of fewer values than ranks passed; an
all_equal's values that were no strings failed in ``json.loads`` with a bare TypeError. The
shard is a real shard process whose gather replies are tampered with.
"""

from __future__ import annotations

import pytest
from ps_helpers import assert_malformed_reply, insecure_worker, small_net

from distconv.sync.base import SyncError

#: ``python -m distconv`` whose answers to gathers are tampered with (argv[1]): ``null``,
#: ``text``, ``bool``: an allreduce's sum holds that; ``none``: a values reply without values;
#: ``short``: a values reply of no value; ``digest``: an all_equal's values of numbers
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

fault = sys.argv.pop(1)
reply = Shard._reply
bad = {"null": None, "text": "x", "bool": True}

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if "sum" in fields and fault in bad:
        fields["sum"] = [bad[fault]] * len(fields["sum"])
    elif "values" in fields and request.get("tag", "").startswith("all_equal"):
        if fault == "none":
            del fields["values"]
        elif fault == "short":
            fields["values"] = []
        elif fault == "digest":
            fields["values"] = [5] * len(fields["values"])
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""
CAUSES = {
    "null": "allreduce:3 answered with sum [None]: not all numbers",
    "text": "allreduce:3 answered with sum ['x']: not all numbers",
    "bool": "allreduce:3 answered with sum [True]: not all numbers",
    "none": "all_equal:1 answered with values None: not a list of 1",
    "short": "all_equal:1 answered with values []: not a list of 1",
    "digest": "all_equal:1 answered with values [5]: not all strings or nil",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fault", sorted(CAUSES))
def test_a_gather_reply_that_does_not_fit_names_shard_0(shards, fault):
    endpoint = shards.tampered(TAMPERED_SHARD, fault)
    sync = insecure_worker([endpoint])
    try:
        with pytest.raises(SyncError) as refused:
            sync.setup(small_net().parameters())  # gathers all_equal:1, barrier:2
            sync.allreduce_sum([1.5])
    finally:
        sync.close()
    assert_malformed_reply(refused.value, CAUSES[fault], endpoint)


@pytest.mark.timeout(60)
def test_a_well_formed_allreduce_is_summed(shards):
    (endpoint,) = shards.start(1, workers=1)
    sync = insecure_worker([endpoint])
    try:
        sync.setup(small_net().parameters())
        total = sync.allreduce_sum([1.5, -2, 0])
    finally:
        sync.close()
    assert total == [1.5, -2.0, 0.0]
