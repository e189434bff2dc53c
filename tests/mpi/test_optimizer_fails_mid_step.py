"""The optimizer failing in the middle of a step's updates, on a real ``mpiexec -n 2``: the
buckets before it are updated, the later ones not (docs/architecture.md); no step and no
checkpoint may start from there, and closing ends the job: cleanly, since every collective of
the step completed on every rank (``tests/mpi/test_close_after_failed_step.py``)."""

from __future__ import annotations

import json

import pytest

from tests.mpi.common import AFTER_FAILED_SETUP, NEEDS_MPIEXEC, WAYS_ON, run_mpi, script

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_an_optimizer_failing_mid_step_leaves_no_step_and_no_checkpoint(tmp_path, overlap):
    """``checkpoint_state`` handed out the state of no step (c updated twice, b and a once):
    a chief's checkpoint of it, written after the error was caught, would resume every rank
    from a step applied in part."""
    proc = run_mpi(["-n", "2", *script("run_optimizer_fails_mid_step.py"), str(tmp_path), overlap])
    # every collective of step 1 completed on both ranks: close leaves, no rank waits (before,
    # it aborted the job: "sync closed in the middle of step 1")
    assert proc.returncode == 0, proc.stderr
    assert "aborting" not in proc.stderr and "sync closed" not in proc.stderr
    for rank in (0, 1):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert record["finish_step"] == "FloatingPointError: the optimizer fails on b"
        # sgd, lr 0.5, the ranks' summed gradients 2.0 over 4 examples: -0.25 a step
        assert record["values"] == {"a": [-0.25] * 4, "b": [-0.25] * 4, "c": [-0.5] * 4}
        # each refusal names both ways on: a setup on every rank (a second fit, the next
        # test) trains on, as docs/architecture.md says; close ends the job
        assert record["start_step"] == (
            "SyncError: start_step after step 1 (no finish_step, or it failed): " + WAYS_ON
        )
        assert record["checkpoint_state"] == (
            "SyncError: no optimizer state in the middle of step 1 (no finish_step, or it "
            "failed): it may hold a step applied in part (the updates before a failed one are "
            "made); " + WAYS_ON
        )


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_setup_after_it_trains_on_from_the_step_applied_in_part(tmp_path, overlap):
    """docs/architecture.md said the state stays refused "until the sync is closed"; a setup
    (a second fit) lifts the refusal and takes the parameters as they are, rank 0's on every
    rank: what the docs now say. The job then ends cleanly."""
    args = [str(tmp_path), overlap, "refit"]
    proc = run_mpi(["-n", "2", *script("run_optimizer_fails_mid_step.py"), *args])
    assert proc.returncode == 0, proc.stderr
    half = {"a": [-0.25] * 4, "b": [-0.25] * 4, "c": [-0.5] * 4}
    for rank in (0, 1):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert record["values"] == half
        assert record["checkpoint_state"].startswith("SyncError: no optimizer state in the ")
        assert record["refit_checkpoint_state"] == "passed"
        assert record["refit_values"] == half  # rank 1's 7.0 replaced by rank 0's a
        assert record["refit_step"] == "passed"
        assert record["refit_stepped"] == {"a": [-0.5] * 4, "b": [-0.5] * 4, "c": [-0.75] * 4}


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_setup_every_rank_refuses_keeps_the_step_applied_in_part_refused(tmp_path, overlap):
    """A setup refused in its job check (JobMismatch) changed nothing: the parameters still
    hold step 1 applied in part. It ended the refusal all the same (its ``_open = None``), so
    ``checkpoint_state`` handed that state out and ``start_step`` began a step on it; both are
    refused now, the step naming the failed setup."""
    args = [str(tmp_path), overlap, "mismatch"]
    proc = run_mpi(["-n", "2", *script("run_optimizer_fails_mid_step.py"), *args])
    assert proc.returncode == 0, proc.stderr  # nothing pending after the refused setup
    for rank in (0, 1):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        setup = record["setup"]
        assert setup.startswith("JobMismatch: ") and "config.rank: " in setup, setup
        assert record["mismatch_checkpoint_state"] == record["checkpoint_state"]
        assert record["mismatch_start_step"] == (
            f"SyncError: start_step after a setup that failed on every rank ({setup}): "
            + AFTER_FAILED_SETUP
        )
