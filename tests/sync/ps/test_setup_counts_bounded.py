"""A shard's count of each worker's setups (``setup_of``, ``setup_said``: which setup since
the seed a worker's latest hello is of, and the number it said) is kept for the workers that
can still say hello of the job: each rank's worker whose hello the shard took last, and the
one that spoke last. A rank restarted again and again within one job (a crash loop under the
kubelet, async ``--on-worker-loss continue`` taking each restart back, or a worker of another
config refused at each start) once added an entry per restart, for as long as the job lasted.
Real shards on 127.0.0.1 (port 0), their requests handed over one at a time."""

from __future__ import annotations

import pytest

from distconv.sync.ps.job_hello import hello_fields

pytestmark = pytest.mark.timeout(60)

#: how many times a rank's worker restarts within the job
RESTARTS = 40
#: the first setup's rate, and the rates a later setup's hellos carry
OLD, NEW, OTHER = 0.05, 0.2, 0.3
#: the run ids of the first workers of ranks 0 and 1; a restart of rank r is FIRST_RUNS[r] + k
FIRST_RUNS = (5, 1000)


def job(lr: float, shape: int = 4) -> dict:
    """A job's description: one parameter of ``shape`` values, SGD at ``lr``."""
    return {"optimizer": {"name": "sgd", "lr": lr}, "parameters": [["w", [shape], "float64"]]}


def hello(h, rank: int, run: int, setup: int, description: dict) -> dict:
    """Rank ``rank``'s hello from its worker of run id ``run``, of that worker's ``setup``-th
    setup, naming ``description``; the reply's header."""
    head = {"op": "hello", "rank": rank, "host": "h", **hello_fields(description)}
    return h.ask({**head, "run": run, "setup": setup})[0]


def started(hand, mode: str, **config):
    """A shard of ``mode`` for two workers, each of whose first setup said hello at
    :data:`OLD`, seeded."""
    h = hand(workers=2, mode=mode, **config)
    for rank in (0, 1):
        assert hello(h, rank, FIRST_RUNS[rank], 1, job(OLD))["op"] == "ok"
    h.seed()
    return h


def assert_bounded(h, workers: int = 2) -> None:
    """At most two workers' counts per rank: its latest accepted hello's and its latest's."""
    for name in ("setup_of", "setup_said"):
        counts = getattr(h.shard, name)
        assert len(counts) <= 2 * workers, f"{name}: {len(counts)} entries: {sorted(counts)}"


def test_a_rank_taken_back_after_each_restart_leaves_two_counts_at_most(hand):
    """Async, lost workers taken back: rank 1 restarts again and again, each restart's hello
    taken. The shard keeps the counts of rank 1's two latest workers, not of every one."""
    h = started(hand, "async", on_worker_loss="continue")
    for k in range(1, RESTARTS + 1):
        assert hello(h, 1, FIRST_RUNS[1] + k, 1, job(OLD))["op"] == "ok", k
    assert_bounded(h)
    assert (1, FIRST_RUNS[1] + RESTARTS) in h.shard.setup_of


def test_a_refused_restart_loop_leaves_the_live_worker_of_its_rank_in_step(hand):
    """Sync: rank 0's worker lives on while restarts of rank 0 with another model are refused
    again and again. The shard keeps a count for the live worker and the latest restart alone;
    the live worker's next setup, at a new rate, is still its second (rank 1's hello of that
    setup at another rate is refused, naming rank 0 of the same setup)."""
    h = started(hand, "sync")
    for k in range(1, RESTARTS + 1):
        reply = hello(h, 0, FIRST_RUNS[0] + k, 1, job(OLD, shape=5))
        assert reply["op"] == "error" and reply.get("refused") == "job", reply
    assert_bounded(h)
    assert hello(h, 0, FIRST_RUNS[0], 2, job(NEW))["op"] == "ok"
    refused = hello(h, 1, FIRST_RUNS[1], 2, job(OTHER))
    assert "there: rank 0's, of the same setup" in refused.get("error", ""), refused
    assert h.shard.job.described["optimizer"]["lr"] == NEW
