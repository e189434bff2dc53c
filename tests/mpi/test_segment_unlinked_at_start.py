"""A job's MPICH shared-memory files are unlinked as soon as MPI is up
(:mod:`distconv.sync.mpi.shared_memory`), so ranks killed outright leave nothing in
``/dev/shm``. A SIGKILL of every rank on a node (the OOM killer, a cgroup's kill, Hydra's at a
second Ctrl-C) skips ``MPI_Finalize``, which alone unlinked them: each such job, and each
``--max-restarts`` attempt of one, left 2 MiB there until the host rebooted."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.mpi.common import (
    HERE,
    NEEDS_MPIEXEC,
    mpi_env,
    mpiexec,
    node_segments,
    recorded_segments,
    run_mpi,
)
from tests.processes import job_env, job_left, job_processes

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(150)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def train_args(out: Path, epochs: int) -> list[str]:
    """``distconv train`` of the synthetic set over MPI, writing to ``out``."""
    return [
        "train", "--sync", "mpi", "--data", "synthetic", "--batch-size", "2",
        "--epochs", str(epochs), "--no-progress", "--out", str(out),
    ]  # fmt: skip


def rank_segments(env: Mapping[str, str]) -> dict[int, set[str]]:
    """The processes of the job marked in ``env`` that map MPICH segments (its ranks), each
    with the paths it maps, unlinked or not."""
    mapped = {pid: node_segments(f"/proc/{pid}/maps") for pid in job_processes(env)}
    return {pid: paths for pid, paths in mapped.items() if paths}


def wait_for_an_epoch(run: Path, job: subprocess.Popen, seconds: float) -> None:
    """Wait until the job wrote its first epoch's metrics: every rank's sync is up."""
    metrics = run / "metrics.jsonl"
    deadline = time.monotonic() + seconds
    while not (metrics.exists() and metrics.read_text().strip()):
        assert job.poll() is None, f"the job ended first, with status {job.returncode}"
        assert time.monotonic() < deadline, f"no epoch in {seconds} s"
        time.sleep(0.1)


def still_there(paths: set[str]) -> list[str]:
    return sorted(path for path in paths if Path(path).exists())


def unlink_left(paths: set[str]) -> None:
    """Unlink those of ``paths`` still there: a failed test's own job's, none other's."""
    for path in still_there(paths):
        with contextlib.suppress(OSError):
            Path(path).unlink()


@pytest.mark.parametrize(
    ("ranks", "vcis"), [(2, 1), (3, 1), (2, 2)], ids=["2-ranks", "3-ranks", "2-ranks-2-vcis"]
)
def test_ranks_killed_outright_leave_no_segment(tmp_path, ranks, vcis):
    """``2-vcis``: MPICH makes a second file, ``mpich_vci_*``, for the VCIs past the first."""
    run, segments = tmp_path / "run", set()
    command = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "mpi4py", "-m", "distconv"]
    vcis_env = {**mpi_env(), "MPIR_CVAR_CH4_NUM_VCIS": str(vcis)}
    with job_env(vcis_env) as env, open(tmp_path / "log", "wb") as log:
        job = subprocess.Popen(
            [*command, *train_args(run, 400)], env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            wait_for_an_epoch(run, job, 90)
            mapped = rank_segments(env)
            segments = set().union(*mapped.values())
            assert len(mapped) == ranks and len(segments) == vcis, mapped
            assert all(paths == segments for paths in mapped.values()), mapped  # one node's
            unlinked_while_running = not still_there(segments)
            for pid in mapped:  # every rank of the node, as the OOM killer or a cgroup may
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            assert job.wait(30) != 0
            assert job_left(env, 30) == {}
            # was: the file stayed, and no process mapped it any more
            assert still_there(segments) == []
            assert unlinked_while_running, "the files were still linked while the job trained"
        finally:
            job.kill()
            job.wait(10)
            unlink_left(segments)


def losses(run: Path) -> list[tuple[float, float]]:
    """Each epoch's train and test loss, as ``metrics.jsonl`` holds them."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [(r["train_loss"], r["test_loss"]) for r in map(json.loads, lines)]


def test_a_rank_slow_to_start_trains_on_the_segment_unlinked_before_it(tmp_path):
    """Rank 0 unlinks the file the moment its ``MPI_Init`` returns, while rank 1, 3 s late,
    was the one that kept it waiting there: rank 1 mapped it first, so it neither made a
    second file of its own (which would hang both ranks, each on its own segment) nor left
    one; and the job trains to the same losses as one whose ranks started together."""
    together, late = tmp_path / "together", tmp_path / "late"
    for run, seconds in ((together, 0), (late, 3)):
        records = run.with_suffix(".records")
        records.mkdir()
        rank = [sys.executable, "-m", "mpi4py", str(HERE / "run_rank_late.py"), str(seconds)]
        rank += [str(HERE / "run_train_recording_segments.py"), str(records)]
        proc = run_mpi(["-n", "2", *rank, *train_args(run, 2)], timeout=90)
        assert proc.returncode == 0, proc.stderr[-3000:]
        recorded = recorded_segments(records)
        assert recorded, "the ranks mapped no shared-memory file: nothing was checked"
        assert still_there(recorded) == []
    assert losses(late) == losses(together)


def test_a_rank_failing_before_mpi_init_leaves_no_segment(tmp_path):
    """A bad option for rank 0 alone (mpiexec's ``:``): it fails before it builds a sync, and
    initialises MPI only to abort the job (``abort_uninitialised``; ranks that all failed alike
    finalise instead). That ``MPI_Init`` maps the node's files, and the ``Abort`` skips
    ``MPI_Finalize``: unlinked on the way in, as a sync's start does, they go with the ranks;
    else every such job left one in ``/dev/shm``."""
    records = tmp_path / "records"
    records.mkdir()
    rank = [sys.executable, "-m", "mpi4py", str(HERE / "run_abort_recording_segments.py")]
    args = ["train", "--sync", "mpi", "--data", "synthetic", "--out", str(tmp_path / "run")]
    bad, good = [*rank, str(records), *args, "--no-such-option"], [*rank, str(records), *args]
    proc = run_mpi(["-n", "1", *bad, ":", "-n", "1", *good], timeout=60)
    assert proc.returncode == 2, proc.stderr[-3000:]  # argparse's, through the abort
    recorded = recorded_segments(records)
    try:
        assert recorded, "the ranks mapped no shared-memory file: nothing was checked"
        assert still_there(recorded) == []
    finally:
        unlink_left(recorded)
