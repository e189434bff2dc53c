"""``--init-from A`` on two ranks, under ``mpiexec -n 2`` and under two parameter-server
workers: the chief alone reads the checkpoint, and the transport's start-up (MPI's broadcast,
the chief's seed of the shards) gives rank 1 its weights, so two ranks of batch 8 end where one
process of batch 16 started from the same weights ends (float64, up to the sums' order). A
rank 1 left on its own random weights would send gradients of another model."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import load_checkpoint
from distconv.job import TrainConfig, train
from tests.launcher.conftest import MATPLOTLIB
from tests.launcher.launch_cli import ENV, launcher_command
from tests.mpi.common import mpiexec, run_mpi
from tests.processes import run_job
from tests.test_init_from import FINE_LR, SETTINGS, first_run, newest

pytestmark = pytest.mark.timeout(240)

#: the train flags of the two-rank runs: half the one process's batch on each
TWO_RANKS = ["--data", "synthetic", "--dtype", "float64", "--epochs", "1", "--batch-size", "8"]


def one_process(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """A's checkpoint, and the weights one process trains from it at batch 16."""
    source = first_run(tmp_path / "a")
    train(TrainConfig(**SETTINGS, out=str(tmp_path / "one"), init_from=str(source), lr=FINE_LR))
    return source, load_checkpoint(newest(tmp_path / "one")).params


def assert_same_run(out: Path, reference: dict[str, np.ndarray]) -> None:
    two = load_checkpoint(newest(out))
    assert two.extra["init_from"]["step"] == 24
    for name, value in reference.items():
        np.testing.assert_allclose(two.params[name], value, rtol=0, atol=1e-10, err_msg=name)


@pytest.mark.mpi
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
def test_two_mpi_ranks_start_from_the_chiefs_init_weights(tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    source, reference = one_process(tmp_path)
    command = ["-n", "2", sys.executable, "-m", "mpi4py", "-m", "distconv", "train", "--sync"]
    command += ["mpi", *TWO_RANKS, "--lr", str(FINE_LR), "--no-progress"]
    command += ["--init-from", str(source), "--out", str(tmp_path / "two")]
    proc = run_mpi(command, timeout=200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_same_run(tmp_path / "two", reference)


def test_two_pserver_workers_start_from_the_chiefs_init_weights(tmp_path):
    source, reference = one_process(tmp_path)
    command = [*launcher_command(), "local", "--workers", "2", "--servers", "1"]
    command += ["--run-dir", str(tmp_path / "two"), "--", *TWO_RANKS, "--lr", str(FINE_LR)]
    command += ["--no-progress", "--init-from", str(source)]
    env = {**ENV, "HOME": str(tmp_path / "home"), "MPLCONFIGDIR": MATPLOTLIB}
    proc = run_job(command, env=env, timeout=200, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_same_run(tmp_path / "two" / "train", reference)
