"""The Trainer over MPI, against one process: accumulated passes (with ranks that have nothing
in the short last step's last pass) and a resume from a checkpoint, each equal to one process
training the same global batches (float64, Adam, ``run_trainer.py`` under a real
``mpiexec -n 2``)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.equivalence import Job, mismatch, reference_weights
from tests.mpi.common import (
    NEEDS_MPIEXEC,
    max_relative,
    params_of,
    run_mpi,
    script,
    small_lenet,
    weights,
)

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def one_process(epochs: int, examples: int = 37, ranks: int = 2) -> dict[str, np.ndarray]:
    """One process, 2 examples a pass for each of ``ranks``, 3 passes a step: the ranks' global
    batch (12 for 2 ranks)."""
    job = Job(batch_size=2, accumulate=3, epochs=epochs, examples=examples, lr_decay=1.0)
    return reference_weights(ranks, job)


def two_ranks(tmp_path, name: str, overlap: str, epochs: int, examples=37, run_dir=None, n=2):
    """``run_trainer.py`` on 2 ranks (``n``): rank 0's parameters, and the run's steps so far
    (``OUT`` keeps the rest: ``TMP_PATH/NAME.npz``)."""
    out = tmp_path / f"{name}.npz"
    command = [*script("run_trainer.py"), str(out), overlap, str(epochs), str(examples)]
    proc = run_mpi(["-n", str(n), *command, *([str(run_dir)] if run_dir else [])], timeout=100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = dict(np.load(out))
    return params_of(saved), int(saved["_steps"])


@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize("examples", [37, 45])
def test_accumulated_passes_on_two_ranks_equal_one_process(tmp_path, overlap, examples):
    """45 examples: in the short last step rank 0 has one example in its last pass and rank 1
    none, so one hands its gradients over from backward and the other from
    ``fire_every_gradient``."""
    ranks, steps = two_ranks(tmp_path, "accumulated", overlap, 2, examples)
    assert steps == 8  # 3 global batches of 12 and a short one, each epoch
    reference = one_process(2, examples)
    assert mismatch(reference, ranks) is None
    moved = max_relative(ranks, weights(small_lenet(seed=0)))
    assert moved > 1e-3  # trained: equal to the reference, not to the start


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_three_ranks_on_fewer_examples_than_ranks_equal_one_process(tmp_path, overlap):
    """2 examples for 3 ranks: in the first step rank 0 has nothing in its last pass (it hands
    its gradients over from ``fire_every_gradient``) and rank 2 nothing at all (it never runs
    backward, so it lays its buckets out by rank 0's first order). Before, the Trainer's firing
    went in network order, which became that first order, while ranks 0 and 1 laid theirs out
    by their backward's: step 1 stopped, the ranks laying out buckets differently."""
    ranks, steps = two_ranks(tmp_path, "fewer", overlap, 2, examples=2, n=3)
    assert steps == 2  # one global batch of 18 holding both examples, each epoch
    assert mismatch(one_process(2, examples=2, ranks=3), ranks) is None
    assert max_relative(ranks, weights(small_lenet(seed=0))) > 1e-3


def test_two_ranks_resumed_from_a_checkpoint_equal_one_process_uninterrupted(tmp_path):
    """One epoch, checkpointed; a new job resumes it for a second: rank 0's optimizer state
    and position reach rank 1 through setup's broadcast."""
    run_dir = tmp_path / "run"
    first, steps = two_ranks(tmp_path, "first", "1", epochs=1, run_dir=run_dir)
    assert steps == 4 and mismatch(one_process(epochs=1), first) is None
    resumed, steps = two_ranks(tmp_path, "resumed", "1", epochs=2, run_dir=run_dir)
    epochs = int(np.load(tmp_path / "resumed.npz")["_epochs"])
    assert epochs == 1  # the second epoch only: it resumed, it did not start again
    assert steps == 8  # the run's: the sync numbered its steps from the checkpoint's 4
    assert mismatch(one_process(epochs=2), resumed) is None
    assert max_relative(resumed, first) > 1e-3  # the second epoch did train
