"""row_counts.count_problems checks the per-row counts only: the scalar count (Adam's
``step``) is state_problems' to check, as it is in LocalSync and MPISync, and the two run in
that order in PServerSync.load_state_dict, so a second check of it was dead code."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.local import state_problems
from distconv.sync.ps.row_counts import count_problems

pytestmark = pytest.mark.timeout(30)


def test_per_row_counts_that_are_no_count_are_named_by_key():
    state = {
        "w": {
            "step_per_row": np.array([1, -1]),
            "step_runs_per_row": np.array([[0.0, 2.5]]),
            "step": np.int64(3),
        }
    }
    assert count_problems(state) == [
        "w/step_per_row: holds -1, not a count (a whole number from 0 to 2**63 - 1, as int64 "
        "holds)",
        "w/step_runs_per_row: holds 2.5, not a count (a whole number from 0 to 2**63 - 1, as "
        "int64 holds)",
    ]


@pytest.mark.parametrize("bad", [-1, 2.5, float("nan"), 2**63], ids=str)
def test_a_scalar_count_is_left_to_state_problems_which_refuses_it(bad):
    fresh = {"w": create_optimizer("adam").init_state(np.zeros((), np.float32))}
    state = {"w": {"m": np.zeros(()), "v": np.zeros(()), "step": bad}}
    assert count_problems(state) == []
    (said,) = state_problems(fresh, state)
    assert said.startswith("w/step: holds ") and "not a count" in said
