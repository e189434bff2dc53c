"""A fast rank's wait for a slow one in a step check that refuses the step at the head of
``finish_step`` is in its ``sync_seconds``, as the same wait is where the check completes (and
refuses) in backward (``run_refused_check_wait.py``, real ``mpiexec -n 2``). ``finish_step``
counted its time only once its flags had gone: a refusal there, before them, counted nothing
(rank 0 read 0.0 s after waiting 0.3 s), while in backward the wait was counted."""

from __future__ import annotations

import json

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_two_ranks

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]

SLEEP = 0.3  # seconds rank 1 sleeps before it starts the step


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_wait_in_a_check_refused_in_finish_step_is_in_sync_seconds(tmp_path, overlap):
    run_two_ranks("run_refused_check_wait.py", tmp_path, overlap, str(SLEEP))
    fast, slow = (json.loads((tmp_path / f"wait{r}.json").read_text()) for r in (0, 1))
    for said in (fast, slow):
        assert "lay out gradient buckets differently" in said["said"], said
        assert said["sync_seconds"] <= said["step_seconds"], said  # counted once
    assert fast["sync_seconds"] >= SLEEP / 2, fast
    assert not list(tmp_path.glob("rank*.err"))
