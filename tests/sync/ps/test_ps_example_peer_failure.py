"""The examples when another rank fails: they exit 75, as ``distconv train`` does.

A rank whose step cannot complete because another rank failed raises ``PeerFailed``. The
examples let it propagate: status 1, like any error, so where that rank exited before the one
that failed (one run in two under ``distconv-launch local --workers 2 --servers 1``), the
launcher reported it, the victim, as the job's failure. With 75 the launcher waits for the rank
that failed and names it (``distconv.distributed.run_main``).
"""

from __future__ import annotations

import sys

import pytest
from ps_helpers import REPO_ROOT, script_ranks

#: runs an example, with rank 1's fifth step raising: rank 0 is its victim
FAILING_RANK_1 = """\
import runpy, sys
from distconv.trainer import Trainer

step = Trainer.train_step


def failing(self, *args, **kwargs):
    if self.sync.rank == 1 and self.pos.step == 5:
        raise RuntimeError("rank 1 broke at step 5")
    return step(self, *args, **kwargs)


Trainer.train_step = failing
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("example", ["mixed_regression.py", "sparse_table.py"])
def test_a_rank_stopped_by_another_ranks_failure_exits_75(shards, tmp_path, example):
    (endpoint,) = shards.start(1, workers=2)
    script = tmp_path / "failing_rank_1.py"
    script.write_text(FAILING_RANK_1)
    argv = [sys.executable, str(script), str(REPO_ROOT / "examples" / example), "--epochs", "1"]
    (status0, err0), (status1, err1) = script_ranks(argv, endpoint, 90)
    assert status1 == 1 and "RuntimeError: rank 1 broke at step 5" in err1, err1
    assert "PeerFailed" in err0 and "rank 1 broke at step 5" in err0, err0  # the traceback
    assert status0 == 75, err0[-2000:]
