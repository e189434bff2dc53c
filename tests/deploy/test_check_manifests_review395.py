"""``distconv check-manifests``: review k395's findings, each shown by a test that failed
before its fix."""

from __future__ import annotations

import os
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
