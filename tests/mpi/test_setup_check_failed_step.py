"""Setup's check names the step that failed on a rank alone at any step number
(``StepCheck.say_setup``, ``where``).

Its row's count kept 1 + the failed step above its 32 bits of abandoned steps, in the exchange's
int64: a setup after a ``finish_step`` that failed alone at step 2**31 - 1 or later raised an
OverflowError from setup's check (no SyncError, nothing named) as the row was written. It keeps
how far back the step is (1: it is always the last one, every later step refused until the
setup), which fits at any step number.
"""

from __future__ import annotations

import pytest

from distconv.sync.mpi import SingleRankComm
from distconv.sync.mpi.step_check import StepCheck, where

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize("steps", [1, 2**31, 2**40])
def test_setup_s_check_names_the_step_that_failed_alone_at_any_step_number(steps):
    check = StepCheck(SingleRankComm())
    check.say_setup(steps, 3, steps - 1)  # was: OverflowError from 2**31 on
    assert where(check._every.tolist()[0]) == (
        f"comparing the job (setup's check) after {steps} step{'s' if steps != 1 else ''} "
        f"(3 abandoned) (its finish_step of step {steps - 1} failed)"
    )


def test_a_healthy_setup_s_row_says_its_abandoned_steps_alone():
    check = StepCheck(SingleRankComm())
    check.say_setup(2**40, 2)
    assert where(check._every.tolist()[0]) == (
        f"comparing the job (setup's check) after {2**40} steps (2 abandoned)"
    )
