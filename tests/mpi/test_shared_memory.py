"""Which MPICH shared-memory files a process maps, read from its ``/proc/<pid>/maps`` (the
abort's clean-up, :mod:`distconv.sync.mpi.shared_memory`; a real abort:
``test_failures.py::test_one_rank_raising_ends_the_job``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from distconv.sync.mpi.shared_memory import mapped_segments
from tests.child_env import child_path

MAPS = """\
7f0000000000-7f0000200000 rw-s 00000000 00:1a 123 /dev/shm/mpich_shm_1a2b3c4d_0
7f0000200000-7f0000400000 rw-s 00200000 00:1a 123 /dev/shm/mpich_shm_1a2b3c4d_0
7f0000400000-7f0000600000 rw-s 00000000 00:1a 124 /dev/shm/mpich_shm_99_0 (deleted)
7f0000600000-7f0000800000 rw-s 00000000 00:1a 125 /dev/shm/other_segment
7f0000800000-7f0000a00000 r--p 00000000 08:01 126 /tmp/dev/shm/mpich_shm_fake_0
7f0000a00000-7f0000c00000 rw-p 00000000 00:00 0
7f0000c00000-7f0000e00000 rw-s 00000000 00:1a 127 /dev/shm/mpich_vci_1a2b3c4d_0
"""


def test_each_mapped_segment_is_named_once_and_an_unlinked_one_not(tmp_path):
    """The VCIs' file too: ``MPIR_CVAR_CH4_NUM_VCIS`` above 1 makes it beside the first, and
    MPICH unlinks it only in ``MPI_Finalize`` as well."""
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    assert mapped_segments(str(maps)) == [
        "/dev/shm/mpich_shm_1a2b3c4d_0",
        "/dev/shm/mpich_vci_1a2b3c4d_0",
    ]


def test_no_maps_to_read_names_none(tmp_path):
    assert mapped_segments(str(tmp_path / "missing")) == []


#: a child that maps an MPICH-named segment (as ``MPI_Init`` does) and is then ended by its
#: watchdog below ``MPI_THREAD_MULTIPLE``: no ``Abort``, its own SIGKILL (``end_process``)
ENDED_BY_ITS_WATCHDOG = """\
import mmap, os, sys
from distconv.sync.mpi.watchdog import abort_on_stall
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
os.ftruncate(fd, mmap.PAGESIZE)
segment = mmap.mmap(fd, mmap.PAGESIZE)
os.close(fd)
abort_on_stall(object(), 1, None)("step 3 waited 60 s")
"""


@pytest.mark.skipif(
    not os.path.isdir("/proc/self") or not os.path.isdir("/dev/shm"),
    reason="needs Linux's /proc and /dev/shm",
)
def test_a_rank_its_watchdog_ends_unlinks_the_segment_too():
    """The watchdog's way below ``MPI_THREAD_MULTIPLE`` (SIGKILL, no ``Abort``) skips
    ``MPI_Finalize`` as an abort does: its file stayed in /dev/shm until the host rebooted."""
    segment = Path(f"/dev/shm/mpich_shm_test{uuid.uuid4().hex}_0")  # no other run's name
    env = {**os.environ, "PYTHONPATH": child_path()}
    try:
        ended = subprocess.run(
            [sys.executable, "-c", ENDED_BY_ITS_WATCHDOG, str(segment)],
            capture_output=True,
            text=True,
            env=env,
            timeout=20,
        )
        assert ended.returncode == -signal.SIGKILL, ended.stderr
        assert "step 3 waited 60 s" in ended.stderr
        assert not segment.exists()
    finally:
        with contextlib.suppress(FileNotFoundError):
            segment.unlink()
