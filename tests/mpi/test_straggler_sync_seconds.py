"""Under a real ``mpiexec -n 2`` a fast rank's wait for a slow one is counted in its
``traffic()["sync_seconds"]`` and ``/metrics``' ``distconv_allreduce_seconds``, as on the
parameter server (``run_straggler.py``: rank 1 sleeps before each step).

The fast rank waits in the step check, which completes as backward packs the first bucket,
before ``finish_step``; ``sync_seconds`` counted ``finish_step``'s time alone, so a straggler
showed in no sync count (rank 0 read 0.035 s after waiting 0.9 s for rank 1). Where no bucket
goes in backward (a step with no gradient) the check completes at the head of ``finish_step``,
inside its own timer: that wait is counted once, not by both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_two_ranks

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]

SLEEP = 0.05  # seconds rank 1 sleeps before each of its 10 steps


@pytest.mark.parametrize("where", ["backward", "finish"])
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_fast_ranks_wait_for_a_straggler_is_in_its_sync_seconds(tmp_path, overlap, where):
    """Rank 0's ``sync_seconds`` exceeds rank 1's by at least half of what rank 1 slept, is
    served whole in the histogram, one sample a step, and is counted once: within the time its
    steps took (every wait it counts lies in a step, the sleep outside; the check's wait counted
    twice would be about twice the sleep, above the steps' time)."""
    out = tmp_path / "straggler"
    run_two_ranks("run_straggler.py", out, overlap, str(SLEEP), where)
    fast, slow = (json.loads(Path(f"{out}.{rank}.json").read_text()) for rank in (0, 1))
    assert fast["steps"] == slow["steps"] == 10, (fast, slow)
    assert slow["slept"] == pytest.approx(10 * SLEEP) and fast["slept"] == 0.0
    assert fast["sync_seconds"] - slow["sync_seconds"] >= slow["slept"] / 2, (fast, slow)
    for said in (fast, slow):
        assert said["sync_seconds"] <= said["step_seconds_sum"], said  # the check's wait not twice
        assert said["allreduce_seconds_sum"] == pytest.approx(said["sync_seconds"]), said
        assert said["allreduce_seconds_count"] == said["step_seconds_count"] == 10, said
