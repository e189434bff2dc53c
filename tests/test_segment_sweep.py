"""The test run's sweep of the MPICH shared-memory files its aborted jobs left
(``tests/conftest.py``: :func:`sweep_segments`), on files in ``tmp_path``."""

from __future__ import annotations

import os
import time

import pytest

from tests.conftest import sweep_segments


def made(path, uid: int | None = None, seconds_ago: float = 2):
    """``path``, written ``seconds_ago`` (by default older than the sweep's one-second grace)."""
    path.write_bytes(b"\0" * 64)
    if uid is not None:
        os.chown(path, uid, -1)
    old = time.time() - seconds_ago
    os.utime(path, (old, old))
    return path


def test_a_leftover_of_this_user_is_removed_and_one_there_before_kept(tmp_path):
    leftover, older = made(tmp_path / "mpich_shm_a_0"), made(tmp_path / "mpich_shm_b_0")
    sweep_segments(str(tmp_path / "mpich_shm_*"), {str(older)})
    assert (leftover.exists(), older.exists()) == (False, True)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown needs root")
def test_another_users_file_is_left(tmp_path):
    """Another user's processes' maps are unreadable without ``CAP_SYS_PTRACE`` (a container
    run as root lacks it): their live job's file looked unmapped, and root unlinked it."""
    theirs = made(tmp_path / "mpich_shm_c_0", uid=65534)
    sweep_segments(str(tmp_path / "mpich_shm_*"), set())
    assert theirs.exists()


def test_a_topology_file_is_removed_only_past_its_grace(tmp_path):
    """Hydra's topology files get a minute: a younger one may be another run's job starting."""
    left, starting = (
        made(tmp_path / "hydra_hwloc_xmlfile_a", seconds_ago=61),
        made(tmp_path / "hydra_hwloc_xmlfile_b", seconds_ago=30),
    )
    sweep_segments(str(tmp_path / "hydra_hwloc_xmlfile_*"), set(), grace=60)
    assert (left.exists(), starting.exists()) == (False, True)
