"""A bad option every rank of ``mpiexec -n 2 distconv train`` refuses alike ends the job
through ``MPI_Finalize``, not ``MPI_Abort``: MPICH's Hydra leaves a
``/tmp/hydra_hwloc_xmlfile_*`` behind each aborted job, and nobody waits for anyone here. One
rank that did not fail still gets the abort, or the job would wait for it for ever."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: what MPICH's Hydra writes for its ranks, and removes unless a rank aborted
HWLOC_FILES = "hydra_hwloc_xmlfile_*"
#: how many times a job is run for a window in which no other job left a Hydra file: on a
#: shared host other jobs' aborts leave some every few seconds, and ``/tmp`` holds no mark of
#: whose each is; a job that aborts leaves one in every run
WINDOWS = 3


def new_hwloc_files(before: set[Path], since: float) -> list[Path]:
    """The Hydra files in /tmp now that were not ``before`` and were written ``since`` (a
    wall-clock time): another job's, written earlier, are not this one's."""
    fresh = []
    for path in set(Path("/tmp").glob(HWLOC_FILES)) - before:
        try:
            if path.stat().st_mtime >= since - 1:  # the file system's clock is coarser
                fresh.append(path)
        except FileNotFoundError:  # another job's, removed at its end
            pass
    return fresh


def train(*args: str) -> list[str]:
    """One rank's ``python -m distconv train ARGS`` (mpi4py's runner is not needed: MPI is
    initialised by distconv, here only to end the job)."""
    return [sys.executable, "-m", "distconv", "train", *args]


@pytest.mark.parametrize("runner", [[], ["-m", "mpi4py"]], ids=["plain", "mpi4py"])
def test_a_usage_error_on_every_rank_finalizes_and_exits_2(runner):
    """Run up to :data:`WINDOWS` times: one run after which no new Hydra file is left shows
    this job leaves none (another job's, written meanwhile, is not told from its own)."""
    command = [sys.executable, *runner, "-m", "distconv", "train", "--lr", "-1"]
    left: list[list[Path]] = []
    for _ in range(WINDOWS):
        before, since = set(Path("/tmp").glob(HWLOC_FILES)), time.time()
        proc = run_mpi(["-n", "2", *command], timeout=60)
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert proc.stderr.count("usage: distconv train") == 2, proc.stderr[-3000:]
        assert "argument --lr: must lie in (0.0, inf), got -1" in proc.stderr
        assert "MPI_Abort" not in proc.stderr
        left.append(new_hwloc_files(before, since))
        if not left[-1]:
            break
    assert [] in left, left


def test_a_usage_error_on_one_rank_alone_aborts_the_job(tmp_path):
    """Rank 1 takes its options and waits for rank 0 in its first collective: rank 0 cannot
    finalise (MPICH's MPI_Finalize would wait for rank 1), so it aborts, once it has waited
    for rank 1's word that it failed too."""
    good = train("--sync", "mpi", "--data", "synthetic", "--out", str(tmp_path / "run"))
    started = time.monotonic()
    proc = run_mpi(["-n", "1", *good, "--lr", "-1", ":", "-n", "1", *good], timeout=60)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "argument --lr: must lie in (0.0, inf), got -1" in proc.stderr
    assert "MPI_Abort(MPI_COMM_WORLD, 2)" in proc.stderr
    assert time.monotonic() - started < 30  # the word's wait, not MPI_Init's give-up alarm
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # rank 1 trained no epoch
