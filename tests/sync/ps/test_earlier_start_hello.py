"""A hello from a worker of an earlier start of the job than its rank's hello before (one
launch, a lower restart count: ``incarnation``) is refused, and leaves the rank to its worker of
the newer start. Three starts of rank 0 said hello in turn; the worker of the first, alive
still (or its hello left in flight), said hello again: taken, it ended the newer worker's run
(every worker told to restart), became the rank's worker, and its next setup moved the
shards' rate. Real shards on 127.0.0.1 (port 0), their requests handed over one at a time."""

from __future__ import annotations

import numpy as np
import pytest
from hand_shard import BLOCKS, ROWS

from distconv.sync.ps.job_hello import hello_fields

pytestmark = pytest.mark.timeout(60)

LAUNCH = "0123456789abcdef"  #: a launch token, as ``new_launch`` makes them
#: the first setup's rate, and a later setup's
OLD, NEW = 0.05, 0.2
#: the run ids of rank 0's workers of restarts 0, 1 and 2, and of rank 1's worker
RUNS, RANK1_RUN = (5, 6, 7), 1000


def job(lr: float) -> dict:
    """A job's description: one parameter of 4 values, SGD at ``lr``."""
    return {"optimizer": {"name": "sgd", "lr": lr}, "parameters": [["w", [4], "float64"]]}


def hello(h, rank: int, run: int, restart: int, setup: int, lr: float = OLD) -> dict:
    """Rank ``rank``'s hello from its worker of ``run``, started at ``restart`` of the launch,
    of that worker's ``setup``-th setup at rate ``lr``; the reply's header."""
    head = {"op": "hello", "rank": rank, "run": run, "host": "h", **hello_fields(job(lr))}
    return h.ask({**head, "setup": setup, "incarnation": [LAUNCH, restart]})[0]


def three_starts(hand, mode: str):
    """A seeded shard of ``mode`` on which rank 0's workers of restarts 0, 1 and 2 said hello
    in turn, each seeded, rank 1's worker (of restart 2) beside them."""
    h = hand(workers=2, mode=mode)
    for restart, run in enumerate(RUNS):
        assert hello(h, 0, run, restart, 1)["op"] == "ok"
        assert hello(h, 1, RANK1_RUN + restart, restart, 1)["op"] == "ok"
        h.seed()
    return h


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hello_of_an_earlier_start_leaves_the_rank_to_its_newer_worker(hand, mode):
    h = three_starts(hand, mode)
    ended = h.shard.ended_run  # of restart 2's hello: the run of restart 1 ended
    for setup, lr in ((1, OLD), (2, NEW)):  # its hello said again, its next setup's
        reply = hello(h, 0, RUNS[0], 0, setup, lr)
        assert reply["op"] == "error", reply
        assert "this worker is of restart 0 of its launch" in reply["error"], reply
        assert "restart 2 said hello since" in reply["error"], reply
    assert h.shard.run_of[0] == RUNS[2] and h.shard.ended_run == ended  # no run ended
    assert h.shard.incarnations[0] == (LAUNCH, 2)
    assert h.shard.job.described["optimizer"]["lr"] == OLD
    push = {"op": "push", "rank": 0, "run": RUNS[0], "step": 1, "count": 1, "lr": 1.0}
    push.update(params=[0], blocks=list(range(BLOCKS)), versions=[0] * BLOCKS)
    reply = h.ask(push, [np.ones((ROWS, 1))] * BLOCKS)[0]
    assert reply["op"] == "error" and "of the run before, refused" in reply["error"], reply
    # the rank's worker of the newest start sets up again at a new rate, and rank 1 with it
    assert hello(h, 0, RUNS[2], 2, 2, NEW)["op"] == "ok"
    assert hello(h, 1, RANK1_RUN + 2, 2, 2, NEW)["op"] == "ok"
    assert h.shard.job.described["optimizer"]["lr"] == NEW
