"""The step check compares the ranks' learning rates, bit for bit: a schedule that reads a
rank-local value (``factor * (1 + rank)``) made MPI ranks apply each step's summed gradient at
rates of their own, so they held different models from the first step, and the job ended
with status 0. Now the step is refused on every rank, naming it, both ranks, both rates and
the way out; ranks that set the same schedule pass every step. The rate rides in the
exchange's layout number: still one Iallgather of three int64 a rank a step.

Real ``mpiexec -n 2`` jobs of ``run_rank_rates.py``; in-process, a rank's check given another
rank's row (``TwoRanks``) shows that the rate is compared exactly (its last bit).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi.comm import JobMismatch
from distconv.sync.mpi.step_agreement import RATE_KEY
from distconv.sync.mpi.step_check import StepCheck
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script
from tests.mpi.test_check_interrupt import TwoRanks

#: the way out the refusal names (the words, not imported from the code under test)
SAME_FACTOR = "every rank must set the same lr factor (set_lr_scale) at every step"
#: the exchange's cost: one Iallgather a step of three int64 sent, three a rank received
EXCHANGE_BYTES = [3 * 8, 2 * 3 * 8]


class OtherRank(TwoRanks):
    """Rank 1 at this rank's step, its digest of ``layout_hash`` and ``lr``; in the mismatch's
    gathers it says ``layout`` at ``lr``."""

    def __init__(self, layout: dict, layout_hash: int, lr: float) -> None:
        super().__init__([0, layout_hash ^ bits(lr), 3])
        self.theirs = json.dumps({**layout, RATE_KEY: bits(lr)}, sort_keys=True).encode()

    def Allgather(self, mine, sizes):  # noqa: N802 - mpi4py's spelling
        sizes[:] = [int(mine[0]), len(self.theirs)]

    def Allgatherv(self, mine, out):  # noqa: N802
        out[0][:] = np.concatenate([mine, np.frombuffer(self.theirs, dtype=np.uint8)])


def needs_mpiexec(test):
    """``test``, marked as every test that starts ``mpiexec`` is (skipped where there is none);
    the in-process tests here run everywhere."""
    for mark in NEEDS_MPIEXEC:
        test = mark(test)
    return test


def bits(lr: float) -> int:
    """``lr``'s float64 bits as an int64."""
    return int(np.float64(lr).view(np.int64))


def ranks_said(tmp_path, mode: str) -> list[dict]:
    """``run_rank_rates.py OUT MODE`` under ``mpiexec -n 2``; each rank's record."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script("run_rank_rates.py"), str(tmp_path), mode], timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads((tmp_path / f"said{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.timeout(90)
@needs_mpiexec
def test_ranks_at_different_rates_are_refused_at_the_first_step_on_every_rank(tmp_path):
    records = ranks_said(tmp_path, "skew")
    for rank, record in enumerate(records):
        assert [s["step"] for s in record["said"]] == [0], record  # refused at once
        words = record["said"][0]["refused"]
        other = 1 - rank
        said = f"step 0: rank {rank} trains at lr {0.003 * (1 + rank)!r} and rank {other} at lr "
        assert said + f"{0.003 * (1 + other)!r}: the ranks' learning rates differ" in words
        assert SAME_FACTOR in words, words
        assert record["iallgather_bytes"] == [EXCHANGE_BYTES]  # no collective but its gathers


@pytest.mark.timeout(90)
@needs_mpiexec
def test_ranks_that_set_the_same_schedule_pass_every_step_at_one_iallgather(tmp_path):
    records = ranks_said(tmp_path, "same")
    for record in records:
        assert record["said"] == [{"step": s, "examples": 4 + 5} for s in range(4)], record
        assert record["iallgather_bytes"] == [EXCHANGE_BYTES] * 4
    assert records[0]["lr_bits"] == records[1]["lr_bits"]


#: this rank's layout and its hash in the in-process checks
LAYOUT, HASH = {"bucket 0": {"bytes": 8}}, 0x0123456789ABCDE


def test_rates_one_bit_apart_are_refused_and_printed_apart():
    """Exact: two rates that differ in their last bit (what a rank's own rounding would make)
    are two rates, each printed so that they read apart."""
    lr = 0.003 * 0.9**3
    apart = float(np.nextafter(lr, 1.0))
    check = StepCheck(OtherRank(LAYOUT, HASH, apart))
    check.post(0, LAYOUT, HASH, 2, lr)
    with pytest.raises(SyncError) as refused:
        check.complete()
    assert f"rank 0 trains at lr {lr!r} and rank 1 at lr {apart!r}" in str(refused.value)
    assert repr(lr) != repr(apart) and math.isclose(lr, apart)
    # every rank raises it alike, before any gradient collective: the job's refusal, which
    # run_main says in one line, as setup's job check's (not a traceback on every rank)
    assert isinstance(refused.value, JobMismatch) and refused.value.raised_alike


def test_the_same_rate_passes_and_sums_the_examples():
    lr = 0.003 * 0.9**3
    check = StepCheck(OtherRank(LAYOUT, HASH, lr))
    check.post(0, LAYOUT, HASH, 2, lr)
    assert check.complete() == 5


@pytest.mark.parametrize("held", [np.float64, np.float32, np.array])
def test_a_rate_an_optimizer_holds_as_a_numpy_number_passes_against_the_same_float(held):
    """An optimizer of a script's own may hold its rate as a numpy scalar (or a 0-d array):
    compared by its value as a float64, as every rank holds it alike."""
    lr = held(0.003)
    check = StepCheck(OtherRank(LAYOUT, HASH, float(lr)))
    check.post(0, LAYOUT, HASH, 2, lr)
    assert check.complete() == 5


def test_a_layout_mismatch_at_the_same_rate_is_still_named_as_one():
    lr, theirs = 0.003, {"bucket 0": {"bytes": 16}}
    check = StepCheck(OtherRank(theirs, 0x0AAAAAAAAAAAAAA, lr))
    check.post(0, LAYOUT, HASH, 2, lr)
    said = "step 0: rank 0 and rank 1 lay out gradient buckets differently (parameters fired "
    said += "in another order?): bucket 0.bytes: 8 here, 16 there"
    with pytest.raises(SyncError, match=re.escape(said)) as refused:
        check.complete()
    assert not isinstance(refused.value, JobMismatch)  # a layout's: a traceback shows where
