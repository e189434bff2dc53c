"""A second fit after a step that one rank abandoned while another finished it
(``run_mpi_abandon_refit.py``, real ``mpiexec -n 2``).

``finish_step`` counts a failed step, ``abandon_step`` does not: the finisher (whose
``finish_step`` failed, "another rank abandoned the step", while telling it to set the sync up
again) and the abandoning rank counted different steps, and the second setup's check refused
it naming only where each rank was ("after 1 step", "after 0 steps"), not why; one rank's abort
could end the other before it said anything, and close's last exchange then blamed "a rank
closed its sync while another went on". Now the check names the cause on both ranks, which
raise it alike and close cleanly (counting abandoned steps too), and ``finish_step`` no longer
advises a setup that is always refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import AFTER_FAILED_SETUP, NEEDS_MPIEXEC, WAYS_ON, run_mpi, script

pytestmark = NEEDS_MPIEXEC

WHERE = (
    "ranks are at different points of the job (rank 0: comparing the job (setup's check) "
    "after 1 step, rank 1: comparing the job (setup's check) after 0 steps (1 abandoned))"
)
CAUSE = "rank 1 abandoned 1 step that rank 0 counted"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_refit_after_a_step_one_rank_abandoned_names_the_cause_on_both(tmp_path, overlap):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script("run_mpi_abandon_refit.py"), str(tmp_path), overlap], 90)
    assert proc.returncode != 0, proc.stderr  # a second fit of such a step is refused
    assert "closed its sync while another went on" not in proc.stderr, proc.stderr
    # raised alike on both ranks with nothing pending (JobMismatch): neither sync aborts the
    # job in close ("Abort(1)" lines are mpi4py's own, for the exception left unhandled)
    assert "aborting the MPI job" not in proc.stderr, proc.stderr
    assert proc.stderr.count(CAUSE) >= 2, proc.stderr  # each rank's own traceback says it
    finished = (tmp_path / "finish0.txt").read_text()
    assert "another rank abandoned the step" in finished, finished
    assert "set the sync up again" not in finished, finished
    for rank in (0, 1):
        path = tmp_path / f"setup{rank}.txt"
        assert path.exists(), (rank, proc.stderr)  # said on both, not aborted first
        text = path.read_text()
        assert text.startswith("JobMismatch: ") and WHERE in text and CAUSE in text, text
        assert "start again from a checkpoint" in text, text
        # start_step's refusal, read before that setup, must not advise it without a word of
        # this case (79a370a's words did: 'set up again on every rank ..., or close')
        assert (tmp_path / f"start{rank}.txt").read_text() == (
            "SyncError: start_step after step 0 (no finish_step, or it failed): " + WAYS_ON
        )
        # and after that refused setup: a step then ran on the old layout and step count,
        # its check naming a mismatch, instead of being refused naming the setup
        assert (tmp_path / f"after{rank}.txt").read_text() == (
            f"SyncError: start_step after a setup that failed on every rank ({text}): "
            + AFTER_FAILED_SETUP
        )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("grad_dtype", [None, "float32", "float16", "bfloat16"])
def test_a_step_another_rank_abandoned_fails_before_any_update(tmp_path, grad_dtype):
    """With the communication thread, every bucket is reduced and the used-parameter flags,
    which say that another rank abandoned the step, are completed before any update
    (``updates.update_step``): the finisher's failed step leaves its parameters as they
    were, not updated from sums that lack the other rank's gradients. On a float32 or float64
    wire each bucket was updated as it was reduced, and where every parameter fired on the
    finisher the flags came after every update: its values held the whole step
    (``a`` at ``[-0.25, 0.75, 1.75]``), a step the other rank never took."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    if grad_dtype == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    wire = [grad_dtype] if grad_dtype else []  # None: the gradients' own (float64)
    command = [*script("run_mpi_abandon_refit.py"), str(tmp_path), "1", *wire]
    proc = run_mpi(["-n", "2", *command], 90)
    finished = (tmp_path / "finish0.txt").read_text()
    assert "another rank abandoned the step" in finished, (finished, proc.stderr)
    values = np.load(tmp_path / "finish0.npz")
    for i, name in enumerate("ab"):
        np.testing.assert_array_equal(values[name], np.arange(3.0) + i, err_msg=name)
