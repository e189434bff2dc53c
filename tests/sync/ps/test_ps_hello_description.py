"""A hello whose description is not a JSON map, or whose digest is malformed or not its
description's, is refused as malformed: a description once became the job's when it came first
(every real worker's hello then failed with a shard error for as long as the shard ran), and,
after a real one, failed as a shard bug with a traceback. A description too large for a hello
travels as its small entries and the digests of its large ones, which the shard compares, and
names the entry that differs. In-process shard."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distconv.optim import SGD
from distconv.parameter import Parameter
from distconv.sync.description import job_description
from distconv.sync.ps.job_hello import DESCRIPTION_BUDGET, HelloJob, hello_fields

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


def _large(batch: int, layers: str = "x") -> dict:
    """The job fields of a hello whose description is over the budget: its small entries as
    text, its large one (``layers``) as a digest."""
    fields = hello_fields({"batch": batch, "layers": layers * DESCRIPTION_BUDGET})
    assert json.loads(fields["description"]) == {"batch": batch}
    assert list(fields["part_digests"]) == ["layers"]
    return fields


@pytest.mark.timeout(60)
def test_descriptions_that_differ_are_named_by_value_else_by_the_entry_s_digest(hand):
    small, large, other_large = hello_fields({"batch": 16, "name": "job"}), _large(8), _large(16)
    other_layers = _large(8, "y")
    said = "rank 1 and rank 0 run different jobs: "
    cases = [  # the job's hello, rank 1's, what the refusal says
        (GOOD, small, "batch: 16 here, 8 there"),  # both whole: the first difference
        (large, other_large, "batch: 16 here, 8 there"),  # an entry both carried
        (large, small, "name: 'job' here, '<missing>' there"),  # "name" comes first
        (GOOD, large, "name: '<missing>' here, 'job' there"),
        (
            large,
            other_layers,
            f"layers: digest {other_layers['part_digests']['layers']} here, "
            f"{large['part_digests']['layers']} there (too large for a hello to carry, so what "
            "in it differs cannot be named: compare this rank's layers with the other ranks')",
        ),
        (  # a hello with no text at all (too many entries for even their digests)
            large,
            {"digest": SOME_DIGEST},
            f"description digest {SOME_DIGEST} here, {large['digest']} there; a description "
            f"over {DESCRIPTION_BUDGET} bytes travels in a hello as its digest alone",
        ),
    ]
    for job, other, expect in cases:
        h = hand(workers=2)
        assert _hello(h, 0, **job)["op"] == "ok"
        refused = _hello(h, 1, **other)
        assert refused["op"] == "error" and refused["error"].startswith(said + expect), refused
        assert _hello(h, 1, **job)["op"] == "ok"  # the same job, whole or in part


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "job, expect",
    [
        ({"description": None, "part_digests": {}}, "part_digests without a description"),
        ({"part_digests": {"layers": "0123"}}, "part_digests must map entries the description"),
        ({"part_digests": {"batch": SOME_DIGEST}}, "part_digests must map entries the"),
        ({"part_digests": {"layers": 7}}, "part_digests must map entries the description"),
        ({"part_digests": ["layers"]}, "header field 'part_digests' has type list"),
        (  # a whole description under another digest: it once became the job's unchecked
            {"description": GOOD["description"], "digest": SOME_DIGEST, "part_digests": {}},
            "part_digests must map entries the description",
        ),
    ],
    ids=["no-description", "short", "carried-too", "int", "list", "empty"],
)
def test_malformed_part_digests_are_refused_and_the_shard_keeps_serving(hand, job, expect):
    h = hand(workers=2)
    hello = {k: v for k, v in {**_large(8), **job}.items() if v is not None}  # None: left out
    reply = _hello(h, 1, **hello)
    assert reply["op"] == "error" and expect in reply["error"], reply
    assert _hello(h, 0, **_large(8))["op"] == "ok"  # the refused hello did not become the job's
    assert _hello(h, 1, **_large(8))["op"] == "ok"


def test_a_large_model_s_config_difference_is_named_by_value():
    """A job of 8,000 parameters (about 300 KB of layout) whose ranks differ in batch size:
    only the digest travelled, and the shard could not say what differed (protocol 6)."""
    params = [Parameter(f"layer{i}.weight", np.zeros((3, 3), np.float32)) for i in range(8000)]
    ours, theirs = (
        job_description(params, SGD(lr=0.1), {"batch_size": b, "seed": 1}) for b in (16, 8)
    )
    fields = hello_fields(ours)
    assert "parameters" in fields["part_digests"], sorted(fields)
    said = HelloJob.of(fields).difference(HelloJob.of(hello_fields(theirs)))
    assert said == "config.batch_size: 16 here, 8 there"
    params[7999] = Parameter("layer7999.weight", np.zeros((3, 4), np.float32))
    other = job_description(params, SGD(lr=0.1), {"batch_size": 16, "seed": 1})
    said = HelloJob.of(hello_fields(other)).difference(HelloJob.of(fields))
    assert said.startswith("parameters: digest "), said


@pytest.mark.timeout(120)
def test_a_partial_description_nested_near_the_limit_never_fails_a_later_hello(hand):
    """A partial description's digest is not checked, so its nesting was first written back
    in difference(): one just shallow enough to parse became the job's, and every later hello
    then failed as a shard error (RecursionError) instead of being told what differs."""
    for depth in range(900, 1000):
        h = hand(workers=2)
        deep = '{"batch": ' + "[" * depth + "]" * depth + "}"
        first = _hello(
            h, 0, digest=SOME_DIGEST, description=deep, part_digests=_large(8)["part_digests"]
        )
        later = _hello(h, 1, **_large(8))
        h.close()
        if first["op"] == "error":
            assert "nested too deep" in first["error"] or "JSON map" in first["error"], first
        else:
            assert later["op"] == "error" and "shard error" not in later["error"], (depth, later)
