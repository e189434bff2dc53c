"""Strings a worker sends that the shard keeps and quotes in every later message naming the
rank are capped on receipt: a hello's ``host`` (``rank 1 (host H, last step S)``
in each timeout, stuck or failed message, so in every error reply once the job failed) and a
gather's tag (``sent nothing for barrier:N``). A MiB host was taken, and the job's failure
reply then carried it whole (over 1 MB, at the header cap; two such ranks passed it, and no
worker could read why its job failed). In-process shard."""

from __future__ import annotations

import time

import pytest
from test_ps_hello_description import GOOD

#: gathers.TAG_DIGITS and handlers.HOST_CHARS, as the protocol documents them
TAG_DIGITS, HOST_CHARS = 20, 255


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "host, why",
    [("x" * 1_000_000, "1000000 characters"), ("x" * (HOST_CHARS + 1), "256 characters"),
     ("h\nrank 0 closed", "not printable")],
    ids=["MiB", "one-over", "newline"],
)  # fmt: skip
def test_a_hello_with_an_absurd_host_is_refused_in_a_short_reply(hand, host, why):
    h = hand(workers=2)
    reply = h.answer({"op": "hello", "rank": 1, "host": host, **GOOD})
    assert reply["op"] == "error", reply
    assert why in reply["error"] and len(reply["error"]) < 200, reply
    assert 1 not in h.shard.hosts
    reply = h.answer({"op": "hello", "rank": 1, "host": "x" * HOST_CHARS, **GOOD})
    assert reply["op"] == "ok", reply


@pytest.mark.timeout(60)
def test_a_failure_names_ranks_in_a_short_reply(hand):
    h = hand(workers=2)
    h.answer({"op": "hello", "rank": 1, "host": "x" * 1_000_000, **GOOD})  # then it hangs
    assert h.answer({"op": "hello", "rank": 0, "host": "h", **GOOD})["op"] == "ok"
    assert h.answer({"op": "gather", "tag": "barrier:" + "1" * TAG_DIGITS, "value": None}) is None
    h.shard._check_timeouts(time.monotonic() + 120)  # rank 1 never came
    reply = h.read()[0]
    assert reply["op"] == "error" and reply["failed_ranks"] == [1], reply
    assert len(reply["error"]) < 300, reply
    assert reply["error"].startswith("rank 1 (whose hello was refused for its host) sent nothing")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("digits", [TAG_DIGITS + 1, 1_000_000])
def test_a_gather_tag_of_too_many_digits_is_refused(hand, digits):
    h = hand(workers=2)
    assert h.answer({"op": "hello", "rank": 0, "host": "h", **GOOD})["op"] == "ok"
    reply = h.answer({"op": "gather", "tag": "barrier:" + "1" * digits, "value": None})
    assert reply is not None and reply["op"] == "error", reply
    assert f"at most {TAG_DIGITS} decimal digits" in reply["error"] and len(reply["error"]) < 200
    assert not h.shard.gathers_held
