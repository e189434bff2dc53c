"""``distconv check-manifests`` reading stdin and pipes: a pipe whose writer is slow to start is
read, not refused; a non-blocking stdin is read to its end; a stdin with no descriptor (held in
memory) is read."""

from __future__ import annotations

import io
import os
import sys
import threading
import time

import pytest

from distconv.deploy import check_command

pytestmark = pytest.mark.timeout(30)


CONFIG_MAP = b"kind: ConfigMap\nmetadata:\n  name: c\n"


def test_a_pipe_whose_writer_is_slow_to_start_is_read_not_refused(monkeypatch):
    """``<(kubectl kustomize ...)`` is a pipe its writer holds open from the start, and may
    write nothing for longer than ``FIFO_WAIT_S`` (remote bases fetched, charts rendered): it
    is read as stdin is. It was refused as ``a FIFO nothing wrote to``, which was false."""
    monkeypatch.setattr(check_command, "FIFO_WAIT_S", 0.1)
    reader, writer = os.pipe()

    def write_late() -> None:
        time.sleep(0.5)  # five times the wait, the writer open all along
        os.write(writer, CONFIG_MAP)
        os.close(writer)

    late = threading.Thread(target=write_late, daemon=True)
    late.start()
    try:
        sources = check_command.read_sources([f"/dev/fd/{reader}"])
    finally:
        late.join(5)
        os.close(reader)
    assert sources == [(f"/dev/fd/{reader}:1", {"kind": "ConfigMap", "metadata": {"name": "c"}})]


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


def test_a_stdin_with_no_descriptor_is_read(monkeypatch):
    """A stdin held in memory (``main()`` called with ``sys.stdin`` replaced, as a wrapper or
    a test does) has no descriptor to poll: it was refused as ``<stdin>: fileno`` once the
    read of a non-blocking stdin registered it with ``poll`` before its first read."""
    text = b"kind: ConfigMap\nmetadata:\n  name: c\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    assert check_command._read(check_command.STDIN) == text
