"""What a recreated MPIJob worker pod (an empty ``emptyDir`` at the run directory) costs a run.

Hydra starts each rank in mpirun's working directory on its own host, so in an MPIJob each
worker pod's ranks write to that pod's own ``emptyDir``. docs/kubernetes.md ("Worker
restarts") says only the pod that holds rank 0 keeps what a resume reads: emptied, the run
starts over; any other pod emptied, rank 0 resumes. Two ranks, each in its own directory as in
two pods, under a real ``mpiexec``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]


def _train(pods: list[Path], epochs: int) -> str:
    """``distconv train --sync mpi --resume auto --out train`` as the rendered launcher runs
    it, rank R working in ``pods[R]``; its stderr (the ranks' log)."""
    train = [sys.executable, "-m", "mpi4py", "-m", "distconv", "train", "--sync", "mpi",
             "--resume", "auto", "--out", "train", "--epochs", str(epochs), "--no-progress",
             "--data", "synthetic"]  # fmt: skip
    args: list[str] = []
    for pod in pods:
        args += [":"] if args else []
        args += ["-n", "1", "-wdir", str(pod), *train]
    done = run_mpi(args, timeout=90)
    assert done.returncode == 0, done.stderr
    return done.stderr


def _recreated(pod: Path) -> None:
    """The pod deleted and created anew: its ``emptyDir`` is empty."""
    shutil.rmtree(pod)
    pod.mkdir()


def test_only_the_pod_of_rank_0_holds_what_a_resume_reads(tmp_path):
    pods = [tmp_path / "worker-0", tmp_path / "worker-1"]
    for pod in pods:
        pod.mkdir()
    _train(pods, 1)
    assert not any(pods[1].iterdir()), "rank 1 wrote to its pod's run directory"
    _recreated(pods[1])
    assert "[0/2] resumed from train/checkpoints/step-" in _train(pods, 2)
    _recreated(pods[0])
    assert "resumed from" not in _train(pods, 3)  # worker-0's checkpoints are gone
