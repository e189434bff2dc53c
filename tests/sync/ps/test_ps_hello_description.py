"""A hello whose description is not a JSON map is refused as malformed: it once became the
job's description when it came first (every real worker's hello then failed with a shard error
for as long as the shard ran), and, after a real one, failed as a shard bug with a traceback.
In-process shard."""

from __future__ import annotations

import json

import pytest

GOOD = json.dumps({"batch": 8, "name": "job"})


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "bad",
    ["{not json", "[1, 2]", "7", "null", "[" * 100_000],
    ids=["garbage", "list", "number", "null", "nested-too-deep"],
)
def test_a_description_that_is_no_json_map_is_refused_and_changes_nothing(hand, bad):
    h = hand(workers=2)
    for first in (True, False):  # before any worker's hello, then after one
        reply, _ = h.ask({"op": "hello", "rank": 1, "host": "h", "description": bad})
        assert reply["op"] == "error", reply
        assert "is not a JSON map" in reply["error"], reply
        if first:
            reply, _ = h.ask({"op": "hello", "rank": 0, "host": "h", "description": GOOD})
            assert reply["op"] == "ok", reply
    reply, _ = h.ask({"op": "hello", "rank": 1, "host": "h", "description": GOOD})
    assert reply["op"] == "ok", reply
    reply, _ = h.ask({"op": "stats"})
    assert reply["stats"]["errors"] == 2 and not reply["failed"], reply
