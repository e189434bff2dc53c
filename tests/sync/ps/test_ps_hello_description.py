"""A hello whose description is not a JSON map, or whose digest is malformed or not its
description's, is refused as malformed: a description once became the job's when it came first
(every real worker's hello then failed with a shard error for as long as the shard ran), and,
after a real one, failed as a shard bug with a traceback. A description too large for a hello
travels as its digest alone, which the shard compares. In-process shard."""

from __future__ import annotations

import pytest

from distconv.sync.ps.job_hello import DESCRIPTION_BUDGET, hello_fields

GOOD = hello_fields({"batch": 8, "name": "job"})
#: a well-formed digest, so that the description's own check is what refuses
SOME_DIGEST = "0123456789abcdef"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "bad",
    ["{not json", "[1, 2]", "7", "null", "[" * 100_000],
    ids=["garbage", "list", "number", "null", "nested-too-deep"],
)
def test_a_description_that_is_no_json_map_is_refused_and_changes_nothing(hand, bad):
    h = hand(workers=2)
    for first in (True, False):  # before any worker's hello, then after one
        hello = {"op": "hello", "rank": 1, "host": "h", "description": bad, "digest": SOME_DIGEST}
        reply, _ = h.ask(hello)
        assert reply["op"] == "error", reply
        assert "is not a JSON map" in reply["error"], reply
        if first:
            reply, _ = h.ask({"op": "hello", "rank": 0, "host": "h", **GOOD})
            assert reply["op"] == "ok", reply
    reply, _ = h.ask({"op": "hello", "rank": 1, "host": "h", **GOOD})
    assert reply["op"] == "ok", reply
    reply, _ = h.ask({"op": "stats"})
    assert reply["stats"]["errors"] == 2 and not reply["failed"], reply


def _hello(h, rank: int, **job) -> dict:
    """Rank ``rank``'s hello with the job fields ``job``; the reply's header."""
    return h.ask({"op": "hello", "rank": rank, "host": "h", **job})[0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "job, expect",
    [
        ({"digest": "0123"}, "digest '0123' is not 16 lowercase hex digits"),
        ({"digest": "0123456789ABCDEF"}, "is not 16 lowercase hex digits"),
        ({"digest": "0123456789abcdeg"}, "is not 16 lowercase hex digits"),
        ({"digest": "0123456789abcdef0"}, "is not 16 lowercase hex digits"),
        ({"digest": "0123456789abcdef\n"}, "is not 16 lowercase hex digits"),
        ({"digest": 7}, "header field 'digest' has type int"),
        ({"description": GOOD["description"]}, "op 'hello': header lacks 'digest'"),
        (
            {**GOOD, "digest": SOME_DIGEST},
            f"hello: digest {SOME_DIGEST} is not its description's ({GOOD['digest']})",
        ),
    ],
    ids=["short", "upper", "not-hex", "long", "newline", "int", "missing", "not-its-own"],
)
def test_a_malformed_digest_is_refused_and_the_shard_keeps_serving(hand, job, expect):
    h = hand(workers=2)
    for first in (True, False):  # before any worker's hello, then after one
        reply = _hello(h, 1, **job)
        assert reply["op"] == "error" and expect in reply["error"], reply
        if first:  # the refused hello did not become the job's
            assert _hello(h, 0, **GOOD)["op"] == "ok"
    assert _hello(h, 1, **GOOD)["op"] == "ok"
    reply, _ = h.ask({"op": "stats"})
    assert reply["stats"]["errors"] == 2 and not reply["failed"], reply


def _large(batch: int) -> dict:
    """The job fields of a hello whose description is over the budget: its digest alone."""
    fields = hello_fields({"batch": batch, "layers": "x" * DESCRIPTION_BUDGET})
    assert "description" not in fields
    return fields


@pytest.mark.timeout(60)
def test_descriptions_that_differ_are_named_when_both_came_whole_else_told_by_digest(hand):
    small, large, other_large = hello_fields({"batch": 16, "name": "job"}), _large(8), _large(16)
    said = "rank 1 runs another job than rank(s) before: "
    by_digest = f"; a description over {DESCRIPTION_BUDGET} bytes travels in a hello as its digest"
    cases = [  # the job's hello, rank 1's, what the refusal says
        (GOOD, small, f"{said}batch: 16 here, 8 there"),  # both whole: the first difference
        (large, other_large, f"{said}description digest {other_large['digest']} here, "),
        (large, small, f"{said}description digest {small['digest']} here, "),
        (GOOD, large, f"{said}description digest {large['digest']} here, "),
    ]
    for job, other, expect in cases:
        h = hand(workers=2)
        assert _hello(h, 0, **job)["op"] == "ok"
        refused = _hello(h, 1, **other)
        assert refused["op"] == "error" and refused["error"].startswith(expect), refused
        if "digest" in expect:
            there = f"here, {job['digest']} there{by_digest} alone"
            assert there in refused["error"], refused
        else:
            assert refused["error"] == expect, refused
        assert _hello(h, 1, **job)["op"] == "ok"  # the same job, whole or as its digest
