"""The MPI start-up's fixed first collective (``distconv.sync.mpi.identity``) over a real
``mpiexec``, whose rank 1 runs another copy of distconv's source (first on its ``PYTHONPATH``):
a comment edited trains on with one warning; another start-up version, or a copy that predates
the start-up record, stops both ranks at once naming both builds, where they hung for the
watchdog's timeout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import distconv
from distconv.sync.mpi.identity import MAGIC
from tests.child_env import child_path
from tests.mpi.common import NEEDS_MPIEXEC, assert_moved, run_mpi, script
from tests.source_copy import copy_source, edit

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

IDENTITY = "distconv/sync/mpi/identity.py"


def run_beside(out: Path, copy: Path):
    """``run_identity.py`` with rank 0 on this checkout, rank 1 on ``copy``: the job, and the
    seconds it took."""
    runner = [*script("run_identity.py"), str(out)]
    other = ["env", f"PYTHONPATH={child_path(copy)}", *runner]
    began = time.monotonic()
    proc = run_mpi(["-n", "1", *runner, ":", "-n", "1", *other], timeout=40)
    return proc, time.monotonic() - began


def said(out: Path) -> dict[int, str]:
    """What each rank raised, of those that wrote it before the other's abort ended them."""
    files = {r: out / f"rank{r}.err" for r in (0, 1)}
    return {r: f.read_text() for r, f in files.items() if f.exists()}


def test_an_edited_comment_on_one_rank_trains_on_with_one_warning(tmp_path):
    copy = copy_source(tmp_path / "copy")
    edit(copy, "distconv/optim.py", "one update rule each", "one update rule each (edited)")
    proc, _ = run_beside(tmp_path, copy)
    assert proc.returncode == 0, proc.stderr
    builds = [(tmp_path / f"build{r}.txt").read_text() for r in (0, 1)]
    assert builds[0] == distconv.build_id() and builds[1] != builds[0]
    assert_moved(tmp_path, 0.5 * (1 + 2) / 2)  # sgd lr 0.5, the mean of the ranks' gradients
    warned = (tmp_path / "log0.txt").read_text()
    ours, theirs = (b.split("+")[1] for b in builds)
    assert warned == (
        "WARNING:distconv.sync.mpi:the ranks run different distconv source (rank 1: build "
        f"{theirs}; rank 0: build {ours}): the job goes on, as their MPI start-up is the same, "
        "but each rank runs its own code; run one build on every rank (distconv --version "
        "prints its build)\n"
    )
    assert not (tmp_path / "log1.txt").read_text()  # one warning, rank 0's


def test_another_start_up_version_stops_both_ranks_at_once_naming_both(tmp_path):
    copy = copy_source(tmp_path / "copy")
    edit(copy, IDENTITY, "STARTUP_VERSION = 1\n", "STARTUP_VERSION = 2\n")
    proc, seconds = run_beside(tmp_path, copy)
    assert proc.returncode != 0 and seconds < 15, proc.stderr  # not the 20 s timeout
    builds = [(tmp_path / f"build{r}.txt").read_text() for r in (0, 1)]
    words = "their setups cannot meet; run one release on every rank (distconv --version "
    expected = {
        rank: f"OtherRelease: rank {1 - rank} runs another distconv (build "
        f"{builds[1 - rank].split('+')[1]}, MPI start-up {2 - rank}), rank {rank} runs distconv "
        f"{builds[rank]} (MPI start-up {1 + rank}): {words}prints its build)"
        for rank in (0, 1)
    }
    errors = said(tmp_path)
    assert errors and all(text == expected[r] for r, text in errors.items()), errors
    assert not list(tmp_path.glob("values*.npz"))


def test_a_rank_without_the_start_up_record_is_named_at_once_on_both_sides(tmp_path):
    """The copy stands for the release before the record (its setup opened with the job
    check's exchange): the record's call taken out of it, nothing else changed."""
    copy = copy_source(tmp_path / "copy")
    edit(
        copy,
        "distconv/sync/mpi/collectives.py",
        "    _introduced = False\n",
        "    _introduced = True\n",
    )
    proc, seconds = run_beside(tmp_path, copy)
    assert proc.returncode != 0 and seconds < 15, proc.stderr
    build = (tmp_path / "build0.txt").read_text()
    expected = {
        0: "OtherRelease: rank 1 did not say which distconv it runs at the start of setup (it "
        "said (-4, 0, 0): comparing the job (setup's check) after 0 steps): a distconv from "
        "before that start-up record, or a sync at another point of the job; rank 0 runs "
        f"distconv {build} (MPI start-up 1): run one release on every rank (distconv "
        "--version prints its build)",
        1: "SyncError: ranks are at different points of the job (rank 0: unknown code "
        f"{MAGIC}, rank 1: comparing the job (setup's check) after 0 steps)",
    }
    errors = said(tmp_path)
    assert errors and all(text == expected[r] for r, text in errors.items()), errors
