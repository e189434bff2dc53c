"""``distconv check-manifests``: review k413's finding on a FIFO another process holds open to
read, shown by a test that failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.deploy.test_check_manifests_review390 import _check_waiting

pytestmark = pytest.mark.timeout(30)

#: a child that opens the FIFO argv[1] to read (not blocking: no writer), says so, then waits
_READER = (
    "import os, sys, time; os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK); "
    "print('open', flush=True); time.sleep(60)"
)


def test_a_fifo_another_process_reads_is_refused_at_once_naming_it(tmp_path):
    """A FIFO with no writer that another process holds open to read (a stale reader, a second
    check) was waited on for ``FIFO_WAIT_S`` (30 s) and refused as 'nothing opened to write':
    a writer that came would have fed that reader too. It is refused at once, naming it."""
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(fifo)], stdout=subprocess.PIPE)
    try:
        assert reader.stdout is not None and reader.stdout.readline() == b"open\n"
        started = time.monotonic()
        status, out, err = _check_waiting(fifo, wait_s=5)
        took = time.monotonic() - started
    finally:
        reader.kill()
        reader.wait(timeout=10)
    assert (status, out) == (2, "")
    assert f"{fifo}: a FIFO another process holds open to read (pid {reader.pid}" in err
    assert took < 4  # the child's start, not the 5 s wait


def test_a_fifo_another_process_holds_to_read_and_write_is_refused_at_once(tmp_path):
    """A process that holds the FIFO open both ways (``exec 3<>fifo``, which keeps a FIFO
    open) counts as a writer: the check took it for one still rendering and read for ever, the
    bytes of any other writer shared with it. It is refused at once, naming it."""
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    holder = _READER.replace("os.O_RDONLY | os.O_NONBLOCK", "os.O_RDWR")
    reader = subprocess.Popen([sys.executable, "-c", holder, str(fifo)], stdout=subprocess.PIPE)
    try:
        assert reader.stdout is not None and reader.stdout.readline() == b"open\n"
        status, out, err = _check_waiting(fifo, wait_s=5, timeout=8)
    finally:
        reader.kill()
        reader.wait(timeout=10)
    assert (status, out) == (2, "")
    assert f"{fifo}: a FIFO another process holds open to read (pid {reader.pid}" in err
