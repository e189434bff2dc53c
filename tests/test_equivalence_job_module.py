"""The equivalence check's job (its settings, model, data and training) is a module of its
own, :mod:`distconv.equivalence_job`; every name :mod:`distconv.equivalence` held for it is
still importable from there, where the docs, examples and tests import it."""

from __future__ import annotations

import numpy as np

import distconv.equivalence
import distconv.equivalence_job
from tests.moved_names import assert_moved

MOVED = (
    "Weights",
    "model",
    "training_data",
    "weights",
    "Job",
    "JOB",
    "RESUMED_JOB",
    "CHECKPOINT_EVERY",
)


def test_the_checks_job_is_its_own_module_and_still_importable_from_equivalence():
    assert_moved(distconv.equivalence, distconv.equivalence_job, MOVED)
    assert distconv.equivalence.RESUMED_JOB == distconv.equivalence.Job(restart_at=8)
    data = distconv.equivalence.training_data(3)
    assert data["image"].shape == (3, 1, 8, 8) and data["image"].dtype == np.float64
    assert distconv.equivalence.JOB.example_count(2) == 5 * 8 + 4 + 1
