"""A second fit after a step every rank abandoned with a bucket on the wire.

``Trainer.fit`` zeroes the gradients, then sets the sync up again. The abandoned step's
allreduce was still pending on the gradient buffers: setup's own collectives moved it on, MPI
wrote the ranks' sum over the zeroed gradients, and setup's new buckets took that in, so the
next step added the abandoned step's gradients (on every rank alike: no error, a wrong step).

And under ``MPI_THREAD_SERIALIZED`` that setup made its first MPI calls while the
communication thread was still inside the abandoned step's reduction: setup stopped the thread
only after its own collectives.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC


def refit(tmp_path, *options: str, thread_level: str | None = None) -> None:
    """Run ``run_refit_after_abandon.py`` on two ranks; check the step after the second setup."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    command = [*script("run_refit_after_abandon.py", thread_level), str(tmp_path), *options]
    proc = run_mpi(["-n", "2", *command], timeout=90)
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):  # the gradients' mean over the ranks, 1.5, at lr 0.5
        values = np.load(tmp_path / f"values{rank}.npz")
        for i, name in enumerate("ab"):
            np.testing.assert_allclose(values[name], np.arange(3.0) + i - 0.75, err_msg=name)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_second_fit_after_an_abandoned_step_trains_on_zeroed_gradients(tmp_path, overlap):
    refit(tmp_path, overlap)


@pytest.mark.timeout(120)
def test_under_serialized_setup_waits_for_the_thread_before_calling_mpi(tmp_path):
    refit(tmp_path, "1", "log", thread_level="serialized")
    for rank in (0, 1):
        calls = json.loads((tmp_path / f"calls{rank}.json").read_text())
        assert calls["overlaps"] == [], (rank, calls["overlaps"])
        assert calls["by_thread"]["distconv-allreduce"] > 0  # the thread did reduce
