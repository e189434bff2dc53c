"""The examples when another rank fails: they exit 75, as ``distconv train`` does.

A rank whose step cannot complete because another rank failed raises ``PeerFailed``. The
examples let it propagate: status 1, like any error, so where that rank exited before the one
that failed (one run in two under ``distconv-launch local --workers 2 --servers 1``), the
launcher reported it, the victim, as the job's failure. With 75 the launcher waits for the rank
that failed and names it (``distconv.distributed.run_main``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from ps_helpers import REPO_ROOT

from tests.child_env import child_path

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
    env = {**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"}
    env.update(WORLD_SIZE="2", DISTCONV_PSERVERS=endpoint, DISTCONV_INSECURE="1")
    argv = [sys.executable, str(script), str(REPO_ROOT / "examples" / example), "--epochs", "1"]
    ranks = [
        subprocess.Popen(
            argv,
            env={**env, "RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for r in range(2)
    ]
    try:
        (_, err0), (_, err1) = (p.communicate(timeout=90) for p in ranks)
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert ranks[1].returncode == 1 and "RuntimeError: rank 1 broke at step 5" in err1, err1
    assert "PeerFailed" in err0 and "rank 1 broke at step 5" in err0, err0  # the traceback
    assert ranks[0].returncode == 75, err0[-2000:]
