"""MPISync's errors name the run's steps, as the Trainer tells them (``SyncStrategy.start_at``):
it counted from 0 in each process, so after a resume its errors, the step check's words and the
watchdog's phase named steps that were not the run's, unlike the checkpoint, the log and the
metrics. ``step N`` counts from 0: the step after N whole ones, the checkpoint of step N's next.

Real ``mpiexec -n 2`` jobs of ``run_step_numbers.py``, each failing on purpose; each rank writes
its error to its own record (``mpiexec`` may drop an aborting rank's stderr)."""

from __future__ import annotations

import json
import re

import pytest

from distconv.run_dir import RunDirectory
from tests.mpi.common import NEEDS_MPIEXEC, assert_moved, run_mpi, script

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(90)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def failed_job(out, *args: str) -> list[str]:
    """``run_step_numbers.py ARGS`` under ``mpiexec -n 2``, which must fail; each rank's
    record (``out/rank<r>.err``), in rank order."""
    proc = run_mpi(["-n", "2", *script("run_step_numbers.py"), args[0], str(out), *args[1:]])
    assert proc.returncode != 0, proc.stderr[-3000:]
    records = [out / f"rank{r}.err" for r in (0, 1)]
    return [f.read_text() if f.exists() else "" for f in records]


def test_a_layout_mismatch_after_a_resume_names_the_runs_step(tmp_path):
    """Resumed at the checkpoint of step 4, the fit's second step is the run's step 5 (the
    Trainer's sixth): it said step 1."""
    run = tmp_path / "run"
    proc = run_mpi(
        ["-n", "2", *script("run_step_numbers.py"), "resumed", str(tmp_path), str(run), "1"]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert RunDirectory(run).latest().step == 4
    records = failed_job(tmp_path, "resumed", str(run), "2", "reversed")
    said = r"SyncError: step 5: rank (0|1) and rank (1|0) lay out gradient buckets differently"
    assert all(re.search(said, r) for r in records), records
    assert RunDirectory(run).latest().step == 4  # nothing past the refused step was written


def test_the_step_check_names_the_step_a_rank_was_told(tmp_path):
    """Told step 8, then 9 after a whole step: where rank 0 starts its step while rank 1 sums
    metrics, both name step 9 and the 9 steps before it (they said step 1, after 1 step)."""
    records = failed_job(tmp_path, "apart")
    said = "ranks are at different points of the job (rank 0: step 9, rank 1: summing 2 values "
    said += "after 9 steps)"
    assert all(said in r for r in records), records


def test_a_second_start_step_names_the_unfinished_step_not_the_next(tmp_path):
    """Told 8, then 9 before a second start_step: the step left unfinished is 8 (it said 0);
    the 9 waits for a step that begins."""
    records = failed_job(tmp_path, "unfinished")
    said = "SyncError: start_step called while step 8 is unfinished: call finish_step first"
    assert all(said in r for r in records), records


def test_the_watchdog_names_the_step_a_rank_was_told(tmp_path):
    """Rank 0 waits in step 8's check for a rank that never comes: the watchdog's phase is the
    run's step (it said step 0)."""
    rank0, _ = failed_job(tmp_path, "stuck")
    wait = r"the Wait of an Iallgather on the job communicator \(step 8\)"
    assert re.search(rf"rank 0: SyncError: waited [\d.]+ s in {wait}", rank0), rank0


@pytest.mark.parametrize("case", ["refit", "close"])
def test_a_step_refused_at_its_check_gives_its_told_number_back(tmp_path, case):
    """After a step that failed on rank 0 alone and one every rank skipped, rank 1 was told
    step 2 and refused it at its check (no rank took it), while rank 0, refused before its
    check, still counted 1 step: setup's check and close's last exchange compared 1 with 2,
    so the second fit was refused (the steps apart) and the close aborted the job, where both
    went on before the sync took the told numbers."""
    proc = run_mpi(["-n", "2", *script("run_step_numbers.py"), case, str(tmp_path)])
    said = [f.read_text() for f in sorted(tmp_path.glob("rank*.err"))]
    assert proc.returncode == 0 and not said, (said, proc.stderr[-3000:])
    if case == "refit":  # rank 0's values after step 0 (none), then a last step: 0.75
        assert_moved(tmp_path, 0.75)


def test_a_fit_retried_after_a_step_failed_on_one_rank_goes_on_past_a_skipped_step(tmp_path):
    """The same through the Trainer: rank 0's first fit fails in step 0's update, rank 1's in
    step 2 (the run's: step 1 held no token), refused at its check; each retries. The retries
    compared 1 step with 2 until the last, and the job aborted; now the second fit passes."""
    proc = run_mpi(["-n", "2", *script("run_step_numbers.py"), "retried", str(tmp_path)])
    fits = [json.loads((tmp_path / f"fits{r}.json").read_text()) for r in (0, 1)]
    assert proc.returncode == 0, (fits, proc.stderr[-3000:])
    assert fits[0][0] == "FloatingPointError: the optimizer fails on rank 0", fits
    assert "rank 1: step 2)" in fits[0][1] and "rank 1: step 2)" in fits[1][0], fits
    assert fits[0][2:] == fits[1][1:] == ["passed"], fits


def test_a_rank_whose_first_step_failed_alone_is_found_where_the_ranks_agree_on_the_order(
    tmp_path,
):
    """Told no firing order, the ranks meet after the fit's first step to agree on one:
    rank 1, whose step 0 passed, meets rank 0's failure there and is refused naming both
    ranks' points, not left waiting; each retries, and the second fit passes."""
    proc = run_mpi(["-n", "2", *script("run_step_numbers.py"), "retried_untold", str(tmp_path)])
    fits = [json.loads((tmp_path / f"fits{r}.json").read_text()) for r in (0, 1)]
    assert proc.returncode == 0, (fits, proc.stderr[-3000:])
    assert fits[0][0] == "FloatingPointError: the optimizer fails on rank 0", fits
    assert "rank 1: summing 4 values after 1 step)" in fits[0][1], fits
    assert fits[1][0] == fits[0][1], fits
    assert fits[0][2:] == fits[1][1:] == ["passed"], fits
