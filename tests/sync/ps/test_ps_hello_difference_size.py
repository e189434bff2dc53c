"""A refused hello quotes the first difference of the two jobs: it quoted both
values whole, so two descriptions differing in a large entry (a model's layers, up to the
hello's 256 KiB) made an error of hundreds of KB, and two of ~600 KB (a client that sends its
whole description) an error reply over the 1 MiB header cap, which the worker could not read.
The difference is cut short; it still names the entry, first."""

from __future__ import annotations

import json

from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.wire import MAX_HEADER_BYTES

SAID = "rank 1 and rank 0 run different jobs: "
#: how a refusal ends, after what differs: whose hellos "here" and "there" are
BY = " (here: rank 1's hello; there: rank 0's, the first the shard accepted)"


def _hello(h, rank: int, **job) -> dict:
    return h.ask({"op": "hello", "rank": rank, "host": "h", **job})[0]


def test_a_large_entry_that_differs_is_named_in_one_short_line(hand):
    h = hand(workers=2)
    assert _hello(h, 0, **hello_fields({"batch": 8, "layers": "x" * 200_000}))["op"] == "ok"
    refused = _hello(h, 1, **hello_fields({"batch": 8, "layers": "y" * 200_000}))
    assert refused["op"] == "error" and refused["error"].startswith(SAID + "layers: 'yyy")
    assert len(refused["error"]) < 1100, len(refused["error"])


def test_two_whole_descriptions_over_half_the_cap_get_a_reply_the_worker_reads(hand):
    h = hand(workers=2)
    for rank, fill in ((0, "x"), (1, "y")):
        text = json.dumps({"layers": fill * 600_000})
        fields = {"description": text, "digest": hello_fields(json.loads(text))["digest"]}
        reply = _hello(h, rank, **fields)  # read with the header cap: raised WireError here
    assert reply["op"] == "error" and reply["error"].startswith(SAID + "layers: 'yyy"), reply
    assert len(h.sent[-1][0][0]) < MAX_HEADER_BYTES


def test_both_values_are_quoted_cut_short_the_jobs_one_too(hand):
    """The line was cut whole at 1,000 characters: a long value here left out the job's value
    (and "here, ... there") that it differs from; each value is cut instead."""
    h = hand(workers=3)
    assert _hello(h, 0, **hello_fields({"batch": 8, "layers": "x" * 2000}))["op"] == "ok"
    refused = _hello(h, 1, **hello_fields({"batch": 8, "layers": "y" * 200_000}))["error"]
    assert refused.startswith(SAID + "layers: 'yyy") and refused.endswith("xxx... there" + BY), (
        refused
    )
    assert "... here, 'xxx" in refused and len(refused) < 1000, refused
    said = "rank 2 and rank 0 run different jobs: "
    refused = _hello(h, 2, **hello_fields({"batch": 8, "layers": "z" * 200_000 + "!"}))["error"]
    assert refused.startswith(said + "layers: 'zzz") and "... here, 'xxx" in refused, refused


def test_values_that_differ_in_their_spaces_alone_are_quoted_as_they_are(hand):
    """The line was put on one line by collapsing every run of whitespace, values' too: two
    values that differ in spaces alone were quoted alike ("'a b' here, 'a b' there")."""
    h = hand(workers=2)
    assert _hello(h, 0, **hello_fields({"act": "a  b"}))["op"] == "ok"
    refused = _hello(h, 1, **hello_fields({"act": "a b"}))["error"]
    assert refused == SAID + "act: 'a b' here, 'a  b' there" + BY, refused
    h2 = hand(workers=2)  # a received key with a line break still makes one line
    assert _hello(h2, 0, **hello_fields({"a\nb": 1}))["op"] == "ok"
    refused = _hello(h2, 1, **hello_fields({"a\nb": 2}))["error"]
    assert refused == SAID + "a b: 2 here, 1 there" + BY, refused


def test_long_values_that_differ_late_are_quoted_where_they_differ(hand):
    """Each value was cut from its start: two long values that differ past the cut (a Mixed
    layer's seventh projection) were quoted alike, "'xxx...' here, 'xxx...' there"."""
    h = hand(workers=2)
    assert _hello(h, 0, **hello_fields({"layers": "x" * 1000 + "a" + "y" * 1000}))["op"] == "ok"
    refused = _hello(h, 1, **hello_fields({"layers": "x" * 1000 + "b" + "y" * 1000}))["error"]
    assert refused.startswith(SAID + "layers: ...xxx") and len(refused) < 1000, refused
    assert "xxxbyyy" in refused.split(" here, ")[0] and "xxxayyy" in refused.split(" here, ")[1]
    assert refused.endswith("yyy... there" + BY), refused
    h2 = hand(workers=2)  # the end of a value is quoted whole: no "..." after it
    assert _hello(h2, 0, **hello_fields({"layers": list(range(300)) + [1]}))["op"] == "ok"
    refused = _hello(h2, 1, **hello_fields({"layers": list(range(300)) + [2]}))["error"]
    assert ", 298, 299, 2] here, ..." in refused and refused.endswith(", 299, 1] there" + BY), (
        refused
    )
