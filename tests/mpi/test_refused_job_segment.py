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


def test_a_job_refused_on_an_out_in_use_leaves_no_segment(tmp_path):
    out, records = tmp_path / "run", tmp_path / "records"
    records.mkdir()
    holder = RunDirectory(out)  # another run's lock, as a sweep point sharing --out meets it
    holder.acquire()
    try:
        rank = [sys.executable, "-m", "mpi4py", str(HERE / "run_train_recording_segments.py")]
        train = ["train", "--sync", "mpi", "--epochs", "1", "--no-progress", "--out", str(out)]
        proc = run_mpi(["-n", "2", *rank, str(records), *train], timeout=60)
    finally:
        holder.release()
    assert proc.returncode != 0
    assert "is in use by" in proc.stderr, proc.stderr[-2000:]
    assert left_segments(records) == []
