"""A second fit after a step abandoned once a float16 bucket had overflowed on the wire, with
the communication thread (``run_abandon_pending_overflow.py``, real ``mpiexec -n 2``).

Each rank's thread refuses the bucket (its wire holds infinity, bitwise the same on every
rank) and skips every reduction after it, so every rank skips the same ones. af4707a's drain
marked the abandoned buckets unpacked from the main thread while the thread might still be
inside that bucket: a rank whose thread got there after its setup did skipped the check,
reduced the next bucket, and waited there for a rank that never came; its setup gave up after
30 s ("the communication thread did not stop") and the job aborted. The check now runs on
every rank alike, and the second fit trains.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC


@pytest.mark.timeout(120)
def test_a_second_fit_after_an_overflowed_abandoned_step_trains(tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script("run_abandon_pending_overflow.py"), str(tmp_path)], 90)
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        assert float((tmp_path / f"setup{rank}.txt").read_text()) < 10.0
        values = np.load(tmp_path / f"values{rank}.npz")
        for i, name in enumerate("ab"):  # the gradients' mean over the ranks, 1.5, at lr 0.5
            np.testing.assert_allclose(values[name], np.arange(3.0) + i - 0.75, err_msg=name)
