"""A setup every rank refuses keeps the last good setup's parameters
(``run_refused_setup_keeps_params.py``, real ``mpiexec -n 2``).

``SyncStrategy.setup`` takes the parameters it is given before its job check. A refused setup
(a JobMismatch, raised alike on every rank) left them in the sync: the refused job's list,
which the ranks disagree on and which has no optimizer state. A broadcast between steps then
sent rank 1's wrong sizes ("message sizes do not match across processes") and raised a
KeyError on rank 0. Now the refused setup changes nothing: the broadcast is the last good
setup's, and makes every rank hold rank 0's values. The barrier and metrics sums are served
too: the refusal changed nothing, on every rank alike (the contract, SyncStrategy.setup; only a
step needs a setup that succeeds).
"""

from __future__ import annotations

import json

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC


@pytest.mark.timeout(120)
def test_a_setup_every_rank_refuses_keeps_the_last_good_setups_parameters(tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script("run_refused_setup_keeps_params.py"), str(tmp_path)], 90)
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for rank, record in enumerate(records):
        assert record["setup"].startswith("JobMismatch: "), (rank, record)
        assert record["params"] == ["a"], (rank, record)
        assert record["broadcast"] == "nothing", (rank, record)
        assert record["barrier"] == "nothing", (rank, record)
        assert record["sum"] == [3.0], (rank, record)  # 1 + 2: every rank's, once
        assert record["a"] == [0.0, 1.0, 2.0], (rank, record)  # rank 0's, on both
    assert proc.returncode == 0, proc.stderr
