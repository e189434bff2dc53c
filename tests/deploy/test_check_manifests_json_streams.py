"""A stream of many JSON documents (``jq -c '.items[]'``, one object a line) is read in time
linear in its length: each document's line was counted from the start of the
text again, so 40000 one-line objects (2 MiB) took 23 s, and a stream at the 64 MiB bound
hours, in a command whose bound was to make any input cost little."""

from __future__ import annotations

import pytest

from distconv.deploy.check_command import _documents

DOCUMENT = '{"kind": "ConfigMap", "metadata": {"name": "c"}}'


@pytest.mark.timeout(20)
def test_a_long_stream_of_json_documents_is_read_in_linear_time():
    count = 100_000
    data = (DOCUMENT + "\n") * count
    docs = _documents("stream.json", data.encode())
    assert [line for line, _ in docs] == list(range(1, count + 1))


@pytest.mark.timeout(20)
def test_each_json_document_has_the_line_it_starts_on():
    """Documents after blank lines, two on one line, one over several lines."""
    text = '\n\n{"kind":\n"A"}\n{"kind": "B"}  {"kind":\n\n"C"}\n\n{"kind": "D"}'
    docs = _documents("stream.json", text.encode())
    assert [(line, doc["kind"]) for line, doc in docs] == [(3, "A"), (5, "B"), (5, "C"), (9, "D")]
