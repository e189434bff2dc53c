"""A job that ``distconv train`` refuses at setup, under ``python -m mpi4py`` (the launcher's
way), leaves no MPICH shared-memory file: mpi4py's own Abort ends it, which skips
``MPI_Finalize``, and each refused job of a sweep left 2 MiB in ``/dev/shm`` until reboot."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from distconv.run_dir import RunDirectory
from tests.mpi.common import HERE, NEEDS_MPIEXEC, run_mpi

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def left_segments(records: Path) -> list[str]:
    """The shared-memory files the job's ranks recorded (:mod:`run_train_recording_segments`)
    that are still in ``/dev/shm``; asserts they recorded some (else nothing was checked)."""
    segments = {line for f in records.glob("rank*.shm") for line in f.read_text().split()}
    assert segments, "the ranks mapped no shared-memory file: nothing was checked"
    return sorted(path for path in segments if Path(path).exists())


def refused_job(records: Path, out: Path, late: float = 0) -> str:
    """Run two ranks of ``distconv train --out OUT``, which refuse it, rank 1 starting ``late``
    seconds after rank 0 (:mod:`run_rank_late`); their stderr."""
    rank = [sys.executable, "-m", "mpi4py", str(HERE / "run_rank_late.py"), str(late)]
    rank.append(str(HERE / "run_train_recording_segments.py"))
    train = ["train", "--sync", "mpi", "--epochs", "1", "--no-progress", "--out", str(out)]
    proc = run_mpi(["-n", "2", *rank, str(records), *train], timeout=60)
    assert proc.returncode != 0
    return proc.stderr


@pytest.mark.parametrize("late", [0, 3], ids=["together", "rank-1-late"])
def test_a_job_refused_on_an_out_in_use_leaves_no_segment(tmp_path, late):
    """``rank-1-late``: rank 0, refused the moment MPI_Init returns, unlinks the file while
    rank 1 was the slow one to start; MPI_Init returned only once rank 1 had mapped it too, so
    rank 1 neither fails to open it nor makes a second one that would be left."""
    out, records = tmp_path / "run", tmp_path / "records"
    records.mkdir()
    holder = RunDirectory(out)  # another run's lock, as a sweep point sharing --out meets it
    holder.acquire()
    try:
        said = refused_job(records, out, late)
    finally:
        holder.release()
    assert "is in use by" in said, said[-2000:]
    assert left_segments(records) == []


def test_a_job_refused_on_an_out_that_holds_a_run_leaves_no_segment(tmp_path):
    """A sweep run a second time: the refusal that offers --resume and --overwrite."""
    out, records = tmp_path / "run", tmp_path / "records"
    records.mkdir()
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"epoch": 1}\n')  # a finished epoch's line
    said = refused_job(records, out)
    assert "already holds a run" in said, said[-2000:]
    assert left_segments(records) == []


def test_a_script_stopped_as_preempted_leaves_no_segment(tmp_path):
    """A script's ``run_main`` said a stop's line and exited 143 without the unlink its errors
    and Ctrl-C get, so mpi4py's abort left the file of every preempted run."""
    rank = [sys.executable, "-m", "mpi4py", str(HERE / "run_preempted_script.py"), str(tmp_path)]
    proc = run_mpi(["-n", "2", *rank], timeout=60)
    assert proc.returncode == 143, proc.stderr[-2000:]
    assert "stopped by SIGTERM after step 8" in proc.stderr, proc.stderr[-2000:]
    assert left_segments(tmp_path) == []


@pytest.mark.timeout(60)
def test_a_script_stopped_as_preempted_before_mpi_init_ends_at_once(tmp_path):
    """A rank stopped that never initialised MPI (its script uses none) ends as a stop does:
    143 at once. Initialising MPI there to abort waited for a peer that never would, then
    SIGALRM ended it a minute later (exit 14, "BAD TERMINATION")."""
    rank = [sys.executable, str(HERE / "run_preempted_without_mpi.py")]
    proc = run_mpi(["-n", "2", *rank], timeout=30)
    assert proc.returncode == 143, proc.stderr[-2000:]
    assert "stopped by SIGTERM after step 8" in proc.stderr, proc.stderr[-2000:]
