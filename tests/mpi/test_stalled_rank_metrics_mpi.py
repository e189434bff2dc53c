"""Under a real ``mpiexec -n 2``, a rank stalled in one step shows in the epoch's line of
``metrics.jsonl``: the other rank's wait in its step exchange (``sync_seconds_per_rank``),
which the record lacked (a 20 s stall read "0.0s waiting in collectives" on every rank), and
in each rank's epoch log line (``run_stalled_rank.py``)."""

from __future__ import annotations

import pytest

from distconv.metrics import read_metrics
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script
from tests.stalled_step import assert_the_stalled_rank_waited_least

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: rank 1's stall, in seconds
STALL = 1.5


def test_the_other_ranks_wait_for_a_stalled_rank_is_in_its_sync_seconds(tmp_path):
    run = tmp_path / "run"
    proc = run_mpi(["-n", "2", *script("run_stalled_rank.py"), str(run), str(STALL)], 100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = read_metrics(run / "metrics.jsonl")
    assert line["step"] == 12, line
    assert_the_stalled_rank_waited_least(line, stalled=1, stall=STALL)
    most = max(line["sync_seconds_per_rank"])
    said = f"({most:.1f}s waiting in step exchanges, {line['collective_seconds']:.1f}s in "
    ours = [m for m in proc.stderr.splitlines() if m.startswith("epoch 1/1 ")]
    assert len(ours) == 2 and all(said in m for m in ours), proc.stderr[-3000:]
