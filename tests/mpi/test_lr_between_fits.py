"""A rate changed between two fits with ``optimizer.set_base_lr`` over MPI (real
``mpiexec -n 2`` jobs of ``run_lr_between_fits.py``): set on every rank, the next fit trains at
it, as one process does (float64, momentum, ``lr_decay``); set on one rank alone, it is
refused on both, by the next setup's job check between fits (naming the way out) and by the
per-step rate check inside one, naming the rates; set inside a step (in forward, after its
check was posted), the step still trains at the rate its check compared, and the next step's
check refuses it before the ranks' weights part."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distconv.equivalence import mismatch
from distconv.optim import create_optimizer
from distconv.rank_endings import different_jobs_in
from distconv.sync.local import LocalSync
from distconv.sync.rate_agreement import SAME_RATE
from tests.lr_changes import DECAY, FIRST_FIT_STEPS, FIRST_LR, NEW_LR, fit_twice
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script, weights

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def two_ranks(tmp_path, who: str) -> None:
    """Run ``run_lr_between_fits.py TMP_PATH WHO`` under ``mpiexec -n 2``; it must exit 0."""
    proc = run_mpi(["-n", "2", *script("run_lr_between_fits.py"), str(tmp_path), who], 100)
    assert proc.returncode == 0, proc.stderr[-3000:]


def refusals(tmp_path, who: str) -> list[dict]:
    """Each rank's refusal (type and words) of :func:`two_ranks`."""
    two_ranks(tmp_path, who)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_a_rate_set_on_every_rank_between_fits_trains_as_one_process(tmp_path):
    two_ranks(tmp_path, "every")
    one = fit_twice(LocalSync(create_optimizer("momentum", lr=FIRST_LR)), "between")
    unchanged = fit_twice(LocalSync(create_optimizer("momentum", lr=FIRST_LR)), "no")
    assert mismatch(weights(one.network), weights(unchanged.network)) is not None
    for rank in (0, 1):
        ranks = dict(np.load(tmp_path / f"rank{rank}.npz"))
        assert (wrong := mismatch(weights(one.network), ranks)) is None, f"rank {rank}: {wrong}"


def test_a_rate_set_on_one_rank_between_fits_is_refused_by_the_job_check(tmp_path):
    said = refusals(tmp_path, "rank0")
    assert said[0]["type"] == said[1]["type"] == "JobMismatch", said
    assert f"optimizer.lr: {NEW_LR!r} here, {FIRST_LR!r} there" in said[0]["message"], said
    assert f"optimizer.lr: {FIRST_LR!r} here, {NEW_LR!r} there" in said[1]["message"], said
    for refusal in said:  # the way out, and the launcher still reads the ranks' jobs in it
        assert refusal["message"].endswith(f": {SAME_RATE}"), said
        assert different_jobs_in([refusal["message"]]) is not None, said


def test_a_rate_set_on_one_rank_inside_a_fit_is_refused_by_the_rate_check(tmp_path):
    said = refusals(tmp_path, "rank0_in_fit")
    # the second fit's second step, of epoch 1
    rates = f"rank 0 trains at lr {NEW_LR * DECAY!r} and rank 1 at lr {FIRST_LR * DECAY!r}"
    assert f"step {FIRST_FIT_STEPS + 1}: {rates}" in said[0]["message"], said
    for words in said:
        assert "learning rates differ" in words["message"], said
        assert "optimizer.set_base_lr, on every rank" in words["message"], said


def test_a_rate_set_on_one_rank_inside_a_step_is_refused_before_the_weights_part(tmp_path):
    """Rank 0 sets it in the forward of the second fit's second step: that step trains at the
    rate both ranks posted, and the next one's check refuses the new one, so both ranks hold
    the same weights when they stop."""
    said = refusals(tmp_path, "rank0_in_forward")
    rates = f"rank 0 trains at lr {NEW_LR * DECAY!r} and rank 1 at lr {FIRST_LR * DECAY!r}"
    assert f"step {FIRST_FIT_STEPS + 2}: {rates}" in said[0]["message"], said
    assert all("learning rates differ" in words["message"] for words in said), said
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in (0, 1)]
    assert (parted := mismatch(*ranks)) is None, f"the ranks' weights parted: {parted}"
