"""/proc/<pid>/stat of a process whose name is no UTF-8 reads like any other."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.procfs import process_stat, stat_fields
from launcher.child import running_groups

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

# names itself b"\xff\xfe(x) y" (PR_SET_NAME, 15), says so, and waits
NAMED = (
    "import ctypes, sys, time\n"
    "ctypes.CDLL(None).prctl(15, b'\\xff\\xfe(x) y', 0, 0, 0)\n"
    "print('named', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.mark.timeout(60)
def test_a_process_named_in_bytes_that_are_no_utf8_is_read():
    child = subprocess.Popen(
        [sys.executable, "-c", NAMED], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert child.stdout.readline() == b"named\n"
        assert Path(f"/proc/{child.pid}/comm").read_bytes() == b"\xff\xfe(x) y\n"
        fields = stat_fields(child.pid)
        assert fields[0] in {"R", "S"}  # the state: running until its sleep begins
        assert int(fields[1]) == os.getpid()  # ppid
        assert int(fields[2]) == child.pid  # its own process group
        stat = process_stat(child.pid)
        assert stat is not None and stat[1] == fields[19] and stat[1].isdigit()
        groups = running_groups()
        assert child.pid in groups and os.getpgrp() in groups
    finally:
        child.kill()
        child.wait()
