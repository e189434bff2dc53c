"""``distconv check-manifests``: review k401's findings, each shown by a test that failed
before its fix."""

from __future__ import annotations

import codecs
import io
import os
import sys
import threading
import time

import pytest

from distconv.deploy import check_command
from distconv.deploy.counts import count_problems
from tests.deploy.test_counts import MPI, PSERVER, _problems_with

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("start", "problem"),
    [
        (2**31, "must be at most 2147483647 (an int32), got 2147483648"),
        (-1, "must be an integer >= 0, got -1"),
        ("2", "must be an integer >= 0, got '2'"),
    ],
)
def test_an_ordinals_start_the_api_server_refuses_is_named(start, problem):
    """``spec.ordinals.start`` is an int32 >= 0: past int32, ``known_count`` gives None and the
    check of the pods' host names judged nothing, with no line saying why."""
    problems = _problems_with(PSERVER, "StatefulSet", ("ordinals",), {"start": start})
    assert problems == [f"StatefulSet ps-pserver spec.ordinals: start {problem}"]


def test_ordinals_of_no_mapping_is_named_once_not_indexed():
    """``ordinals: restart`` holds no ``start`` ("start" is in the string, which is never
    indexed as a mapping): one line, the shape's. manifest_problems drops the field of the
    wrong type before count_problems reads it, so only count_problems called on the object as
    written (a public function) shows the guard: without it, ``"restart"["start"]`` raised
    TypeError."""
    problems = _problems_with(PSERVER, "StatefulSet", ("ordinals",), "restart")
    assert problems == ["StatefulSet ps-pserver: spec.ordinals must be a mapping, got 'restart'"]
    shards = {"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"ordinals": "restart"}}
    assert list(count_problems([shards])) == []


@pytest.mark.parametrize(
    ("codec", "shown"),
    [
        ("utf-16-le", "UTF-16 (little-endian)"),
        ("utf-16-be", "UTF-16 (big-endian)"),
        ("utf-32-le", "UTF-32 (little-endian)"),
        ("utf-32-be", "UTF-32 (big-endian)"),
    ],
)
@pytest.mark.parametrize("text", ["kind: ConfigMap\n", '{"kind": "ConfigMap"}\n', "k: é\n"])
def test_wide_text_without_a_mark_names_the_encoding_it_looks_like(tmp_path, codec, shown, text):
    """UTF-16 or UTF-32 with no byte order mark is refused (kubectl reads it as UTF-8), but the
    line said only ``YAML allows no character #x0000`` or ``invalid start byte``: it now says
    first which encoding the first bytes show, then the error as before."""
    path = tmp_path / "job.yaml"
    path.write_bytes(text.encode(codec))
    with pytest.raises(check_command.ManifestReadError) as refused:
        check_command.read_sources([str(path)])
    said = f"{path}: {shown} text with no byte order mark, by its first bytes, read as UTF-8: "
    assert str(refused.value).startswith(said)
    assert str(refused.value) != said  # the reader's own error follows


@pytest.mark.parametrize(
    "data",
    [
        b"kind: ConfigMap\n\0",  # a NUL further on: no guess from the first bytes
        b"\0\0\0\0kind: ConfigMap\n",
        codecs.BOM_UTF16_LE + "kind: [\n".encode("utf-16-le"),  # a mark: its encoding is read
    ],
)
def test_other_unreadable_text_gets_no_guess(tmp_path, data):
    """Only where the first bytes look like a wide encoding and no mark says one is it named."""
    path = tmp_path / "job.yaml"
    path.write_bytes(data)
    with pytest.raises(check_command.ManifestReadError) as refused:
        check_command.read_sources([str(path)])
    assert "no byte order mark" not in str(refused.value)


def test_a_non_blocking_stdin_is_read_to_its_end(monkeypatch):
    """A stdin whose file description is non-blocking (shared with a parent that set
    ``O_NONBLOCK``) gave what had come so far, the rest of the manifests silently unread, or
    None where nothing had come (a TypeError traceback). It is read to the writer's close."""
    reader, writer = os.pipe()
    os.set_blocking(reader, False)
    first, rest = b"kind: ConfigMap\n", b"metadata:\n  name: c\n"
    os.write(writer, first)

    def write_rest() -> None:
        time.sleep(0.3)
        os.write(writer, rest)
        os.close(writer)

    late = threading.Thread(target=write_rest, daemon=True)
    late.start()
    with io.TextIOWrapper(open(reader, "rb")) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        try:
            data = check_command._read(check_command.STDIN)
        finally:
            late.join(5)
    assert data == first + rest


@pytest.mark.parametrize("value", [2**31, 10**26, 3e9])
def test_a_slots_per_worker_past_int32_is_the_one_problem(value):
    """68b02462 named a count past int32 and kept it from the checks that read it with
    ``known_count``, but those that read it with ``count`` (the liveness probe's ports, the
    ranks a pod runs) still echoed it: ``the ranks listen on 8080-100000000000000000000008079
    (... 100000000000000000000000000 slots)``."""
    problems = _problems_with(MPI, "MPIJob", ("slotsPerWorker",), value)
    assert problems == [
        f"MPIJob pairs: slotsPerWorker must be at most 2147483647 (an int32), got {value!r}"
    ]
