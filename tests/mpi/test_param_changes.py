"""Parameters that change between steps or fire on some ranks only, over real ``mpiexec -n 2``,
against one process training on every rank's examples (float64, momentum: it moves a parameter
even on a zero gradient, so an update that should not happen shows)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script
from tests.mpi.run_param_changes import OPTIMIZER, run

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def ranks_against_one_process(tmp_path, mode: str, overlap: str) -> None:
    proc = run_mpi(["-n", "2", *script("run_param_changes.py"), str(tmp_path), mode, overlap])
    assert proc.returncode == 0, proc.stderr
    want = run(LocalSync(create_optimizer(OPTIMIZER, lr=0.1)), mode, [0, 1])
    for rank in (0, 1):
        got = dict(np.load(tmp_path / f"values{rank}.npz"))
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-12, atol=0, err_msg=name)


@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize("mode", ["freeze", "toggle", "swap"])
def test_a_parameter_frozen_or_given_a_new_gradient_array_after_setup(tmp_path, mode, overlap):
    """The buckets are laid out again: the new gradient array is reduced, a frozen parameter
    is left out (before, its new array was never reduced: the ranks drifted apart silently).
    ``swap`` keeps the count of trained parameters: only their gradient arrays tell."""
    ranks_against_one_process(tmp_path, mode, overlap)


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_parameter_that_fires_on_no_rank_is_not_updated(tmp_path, overlap):
    """Fired on every rank, on one, on none: only the last leaves the optimizer alone."""
    ranks_against_one_process(tmp_path, "unused", overlap)


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_gradient_replaced_by_a_new_array_before_it_fires_is_reduced(tmp_path, overlap):
    """``p.grad = p.grad + g`` instead of ``+=``: the sync copies the new array into its
    bucket (before, the bucket that never saw ``g`` was reduced and the optimizer ran on the
    rank's own gradient: the ranks drifted apart, and the job exited 0)."""
    ranks_against_one_process(tmp_path, "replaced", overlap)


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_gradient_replaced_after_it_fired_ends_the_job_naming_it(tmp_path, overlap):
    """The optimizer would read this rank's own array, not the sum (before: the ranks drifted
    apart, and the job exited 0)."""
    proc = run_mpi(
        ["-n", "2", *script("run_param_changes.py"), str(tmp_path), "late", overlap], timeout=30
    )
    assert proc.returncode != 0
    errors = "\n".join([proc.stderr, *(f.read_text() for f in tmp_path.glob("rank*.err"))])
    assert "the gradient of 'b' was replaced, or the parameter frozen, after it fired" in errors


def test_ranks_that_fire_in_different_orders_agree_on_one_layout(tmp_path):
    """The first step's order is rank 0's on every rank (before, each rank laid out its own
    and the second step stopped at the layout check)."""
    ranks_against_one_process(tmp_path, "order", "0")


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_rank_that_stops_a_step_early_is_named_not_waited_for(tmp_path, overlap):
    proc = run_mpi(
        ["-n", "2", *script("run_param_changes.py"), str(tmp_path), "fewer", overlap], timeout=30
    )
    assert proc.returncode != 0
    errors = "\n".join([proc.stderr, *(f.read_text() for f in tmp_path.glob("rank*.err"))])
    assert (
        "ranks are at different points of the job (rank 0: step 3, rank 1: closed after 3 steps)"
        in errors
    )


@pytest.mark.parametrize(
    ("mode", "causes"),
    [
        ("midstep", ["rank 1: SyncError: sync closed in the middle of step 1 (no finish_step"]),
        ("thread", ["rank 1: SyncError: sync closed after allreduce of gradient bucket 0 failed"]),
        # rank 1 failed step 0 alone, its collectives complete (rank 0's firing order too):
        # it leaves, and its last exchange meets rank 0's next step, naming the step that
        # failed (either rank says it)
        (
            "optimizer",
            [
                "ranks are at different points of the job (rank 0: step 1, rank 1: closed after 1 "
                "step (its finish_step of step 0 failed))"
            ],
        ),
        ("setup", ["rank 0: SyncError: sync closed in the middle of setup (it failed)"]),
        (
            "closed",  # whichever rank notices first
            [
                "rank 0: SyncError: sync closed in the middle of step 1",
                "rank 1: SyncError: ranks are at different points of the job "
                "(rank 0: step 1, rank 1: closed after 1 step)",
            ],
        ),
    ],
)
def test_a_rank_that_closes_after_a_caught_error_ends_the_job_naming_why(tmp_path, mode, causes):
    """Mid-step, after its setup or its thread failed, or after the step check named a rank
    that closed, a rank's close aborts the job (before, the job hung: the other rank waited for
    its collectives). After its optimizer failed, every collective of the step complete, it
    leaves; its last exchange finds the other rank at its next step, and the job ends there."""
    proc = run_mpi(
        ["-n", "2", *script("run_param_changes.py"), str(tmp_path), mode, "1"], timeout=30
    )
    assert proc.returncode == 1, proc.stderr
    said = "\n".join(f.read_text() for f in tmp_path.glob("rank*.err"))
    assert any(cause in said for cause in causes), said


def test_ranks_that_catch_a_job_mismatch_at_setup_all_close_cleanly(tmp_path):
    """Every rank raises the mismatch alike, after collectives all of them completed: nobody
    waits, so closing is no reason to abort (and the cause stays the caller's to report)."""
    proc = run_mpi(
        ["-n", "2", *script("run_param_changes.py"), str(tmp_path), "mismatch", "1"], timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        assert f"rank {rank} caught JobMismatch('rank {rank} and rank" in proc.stderr
    assert "aborting" not in proc.stderr


def test_a_preempted_rank_ends_the_job_with_the_command_lines_status(tmp_path):
    proc = run_mpi(
        ["-n", "2", *script("run_param_changes.py"), str(tmp_path), "preempted", "0"], timeout=30
    )
    assert proc.returncode == 143, proc.stderr
