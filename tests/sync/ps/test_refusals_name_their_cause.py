"""A real shard's refusal of a malformed request names the field or the rule it broke, and the
shard serves on.

Before: a ``hello`` whose ``build`` was 5, or whose ``incarnation`` was no list, was taken
(docs/protocol.md says every field of its Operations table is type-checked); an array table
entry of int32 row ids or of 9 dimensions was refused as ``entry [...] is not [dtype, shape,
nbytes]``, though it was a list of three; a push of ``lr`` -1 was refused as ``count 1 < 0, or
lr -1.0 not finite and >= 0``, false of the count; and an empty header frame got ``header is
not msgpack: ValueError``, while the docs promised ``empty message``. Raw requests from a bare
socket to ``distconv pserver`` processes on 127.0.0.1 (port 0).
"""

from __future__ import annotations

from pathlib import Path

import msgpack
import numpy as np
import pytest
import zmq
from ps_helpers import assert_bad_push_refused_then_worker_served, raw_dealer
from test_ps_hello_description import GOOD

from distconv.sync.ps.wire import PROTOCOL_VERSION, pack, unpack_header

pytestmark = pytest.mark.timeout(60)

PROTOCOL_DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"

#: a hello of rank 1 of a job of 2, well formed
HELLO = {"op": "hello", "id": 1, "job": "local", "rank": 1, "host": "h", **GOOD}
#: a pull of row 1 of block 0, whose one array frame holds the row id (``arrays`` set per case)
PULL_ROWS = {"v": PROTOCOL_VERSION, "op": "pull", "id": 2, "job": "local", "rank": 0,
             "blocks": [0], "rows": [1]}  # fmt: skip
#: array table entries of such a pull (an int64 frame of 8 bytes), and what the refusal says
BAD_ENTRIES = [
    (["int32", [2], 8], "array 0: dtype 'int32' is not one of float32, float64, int64, uint8"),
    (["int64", [1] * 9, 8], "array 0: shape [1, 1, 1, 1, 1, 1, ...] has 9 dimensions, at most 8"),
    (["int64", [True], 8], "array 0: shape [True] has True: dimensions are ints >= 0, never bools"),
    (["int64", [-1], 8], "array 0: shape [-1] has -1: dimensions are ints >= 0, never bools"),
    (["int64", {"a": 1}, 8], "array 0: shape {'a': 1} is not a list"),
    (["int64", [1], "8"], "array 0: nbytes '8' is not an int"),
    (["int64", [1]], "array 0: entry ['int64', [1]] is not [dtype, shape, nbytes]"),
]


def _reply(raw: zmq.Socket, frames: list) -> dict:
    """The shard's reply to ``frames``, sent on the bare socket ``raw``."""
    raw.send_multipart(frames)
    assert raw.poll(10_000), "no reply within 10 s"
    return unpack_header(raw.recv_multipart()[0], request=False)


def _error(raw: zmq.Socket, header: dict) -> str:
    """The error the shard answers the request ``header`` with (one without arrays)."""
    reply = _reply(raw, pack(header))
    assert reply["op"] == "error", reply
    return reply["error"]


def test_a_hello_s_build_and_incarnation_are_type_checked_as_every_field(shards):
    """A ``build`` or ``incarnation`` of another type is refused in the words of every other
    mistyped field, on a hello or any other op; the worker's good hello is taken after."""
    (endpoint,) = shards.start(1, workers=2)
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    try:
        assert _error(raw, {**HELLO, "build": 5}) == "header field 'build' has type int"
        said = _error(raw, {**HELLO, "incarnation": "0123456789abcdef 1"})
        assert said == "header field 'incarnation' has type str"
        stats = {"op": "stats", "id": 3, "job": "local", "rank": 0, "build": None}
        assert _error(raw, stats) == "header field 'build' has type NoneType"
        good = {**HELLO, "build": "0.1.0+0123456789abcdef", "incarnation": ["0123", 1]}
        reply = _reply(raw, pack(good))
    finally:
        raw.close(0)
        ctx.term()
    assert reply["op"] == "ok", reply
    assert "has type int" in shards.log_text()  # logged as a bad request, as every other


def test_an_array_entry_s_refusal_names_the_rule_it_breaks(shards):
    """Each entry breaks one rule of the array table (the dtype allow-list, at most 8 int
    dimensions >= 0, an int ``nbytes``, three items) and the refusal names that one; the
    shard answers a well-formed request after."""
    (endpoint,) = shards.start(1, workers=1)
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    row_id = np.ones(1, np.int64).tobytes()
    try:
        said = [
            _reply(raw, [msgpack.packb({**PULL_ROWS, "arrays": [entry]}), row_id])["error"]
            for entry, _ in BAD_ENTRIES
        ]
        stats = _reply(raw, pack({"op": "stats", "id": 4, "job": "local", "rank": 0}))
    finally:
        raw.close(0)
        ctx.term()
    assert said == [words for _, words in BAD_ENTRIES]
    assert stats["op"] == "ok", stats


def _push(**bad: float):
    """A push of parameter 0's blocks with the fields ``bad`` in place of the valid ones."""

    def frames(head: dict, blocks: list) -> list:
        return pack({**head, **bad}, [np.ones((b.stop - b.start, 1)) for b in blocks])

    return frames


@pytest.mark.parametrize(
    "bad, said",
    [
        ({"lr": -1.0}, "push: lr -1.0 is not a finite number >= 0"),
        ({"lr": float("nan")}, "push: lr nan is not a finite number >= 0"),
        ({"count": -1}, "push: count -1 is below 0"),
    ],
    ids=["lr-below-0", "lr-nan", "count-below-0"],
)
def test_a_refused_push_names_the_field_that_is_wrong(shards, bad, said):
    """A push whose ``lr`` or ``count`` is out of range is refused naming that field alone
    (never the other, which is right); the shard then trains a real worker's step."""
    assert_bad_push_refused_then_worker_served(shards, _push(**bad), said)


def test_an_empty_header_is_refused_as_an_empty_message(shards):
    """A message whose header frame has 0 bytes gets ``empty message`` and id -1, as the docs'
    validation step 1 says (not msgpack's words for it, which name a Python exception class);
    the shard answers a well-formed request after."""
    (endpoint,) = shards.start(1, workers=1)
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    try:
        empty = _reply(raw, [b""])
        stats = _reply(raw, pack({"op": "stats", "id": 5, "job": "local", "rank": 0}))
    finally:
        raw.close(0)
        ctx.term()
    assert empty["id"] == -1, empty
    assert empty["error"] == "empty message: its header frame has 0 bytes", empty
    assert stats["op"] == "ok", stats
    log = shards.log_text()
    assert "bad request from 127.0.0.1" in log and "empty message: its header frame" in log, log


def test_a_version_that_is_no_integer_is_quoted_as_received(shards):
    """A missing ``v``, a string or a bool is quoted as the shard read it, as docs/protocol.md's
    validation step 3 quotes it (the page said ``None`` for every one of them)."""
    (endpoint,) = shards.start(1, workers=1)
    stats = {"op": "stats", "id": 6, "job": "local", "rank": 0, "arrays": []}
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    try:
        said = [
            _reply(raw, [msgpack.packb({**stats, **version})])["error"]
            for version in ({}, {"v": str(PROTOCOL_VERSION)}, {"v": True})
        ]
    finally:
        raw.close(0)
        ctx.term()
    quoted = ("None", repr(str(PROTOCOL_VERSION)), "True")
    expected = [f"protocol version {v}, expected {PROTOCOL_VERSION}" for v in quoted]
    assert said == expected
    protocol = " ".join(PROTOCOL_DOC.read_text().split())
    assert all(f"`{words}`" in protocol for words in expected[:2]), expected
