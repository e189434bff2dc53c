"""A rank whose script ends under ``run_main`` on a one-line error (a ``DataError``) without
``close()``: ``run_main`` said the line and exited through ``SystemExit(1)``, so the
interpreter kept no uncaught error, the dropped worker's bye at the exit carried none, and the
shard told the rank waiting in the step that rank 1 had closed, blaming no one (the launcher
then named whichever rank exited first). The bye carries the error now, and rank 0 is told
rank 1 failed. A real shard on 127.0.0.1, rank 1 a real subprocess."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ps_helpers import rank_0_beside

from distconv.sync.peers import PeerFailed
from tests.child_env import child_env, child_path

#: a child that imports ps_helpers, as the tests here do
WORKER_ENV = child_env(PYTHONPATH=child_path(Path(__file__).parent), OMP_NUM_THREADS="1")
#: the data error rank 1 ends on, as the Trainer's checks word one
BAD_DATA = "the training set's 'image' holds NaN or infinity in 1 row(s): row 5"

#: rank 1 of 2 under run_main: one step, then a data error, its sync never closed
RANK_1 = f"""
import sys
from ps_helpers import batches, insecure_worker, small_net, train_steps
from distconv.data import DataError
from distconv.script_main import run_main

def main():
    net, sync = small_net(), insecure_worker([sys.argv[1]], 1, 2)
    sync.setup(net.parameters())
    train_steps(net, sync, batches(1, 8), 1, 2)
    raise DataError({BAD_DATA!r})

run_main(main)
"""


@pytest.mark.timeout(90)
def test_a_one_line_error_under_run_main_is_the_dropped_workers_bye(shards):
    (endpoint,) = shards.start(1, 2)
    told, status, err = rank_0_beside(
        endpoint, [sys.executable, "-c", RANK_1, endpoint], WORKER_ENV
    )
    said = err.strip().splitlines()[-1]  # still one line, no traceback
    assert status == 1 and said == f"-c: error: DataError: {BAD_DATA}", err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert isinstance(told, PeerFailed) and told.ranks == (1,), told
    assert f'closed on "exited after an uncaught error: DataError: {BAD_DATA}"' in str(told), told
