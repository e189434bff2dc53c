"""``distconv check-manifests``: review k413's finding on a FIFO another process holds open to
read, as k429 settled it (the wait names the possibility; no other process is looked at). A
process holding it both ways: ``test_check_fifo_k429``."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.deploy.test_check_manifests_command import one_error
from tests.deploy.test_check_manifests_review390 import _check_waiting

pytestmark = pytest.mark.timeout(30)

#: a child that opens the FIFO argv[1] to read (not blocking: no writer), says so, then waits
_READER = (
    "import os, sys, time; os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK); "
    "print('open', flush=True); time.sleep(60)"
)


def test_a_fifo_another_process_reads_ends_in_the_wait_naming_that_possibility(tmp_path):
    """A FIFO with no writer that another process holds open to read (a stale reader, a second
    check): k413 refused it at once by a look at the other processes, which could not tell a
    reader from a holder and refused valid input (review k424), so that look is gone. The
    bounded wait ends it, its one line naming both possibilities, not guessing which."""
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(fifo)], stdout=subprocess.PIPE)
    try:
        assert reader.stdout is not None and reader.stdout.readline() == b"open\n"
        started = time.monotonic()
        status, out, err = _check_waiting(fifo, wait_s=0.5)
        took = time.monotonic() - started
    finally:
        reader.kill()
        reader.wait(timeout=10)
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {fifo}: a FIFO nothing opened to write in 0.5 s (or "
        "another process read what was written: a FIFO gives each byte to one reader)"
    )
    assert took >= 0.5  # the wait, not a refusal at once
