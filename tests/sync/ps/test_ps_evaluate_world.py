"""An evaluation's sum and the epoch's fold through a real shard's gather at a large world.

The evaluation's sum carried a mark of each rank's set at that rank's own place: W + 3 values
from each of W ranks, so shard 0's reply to the gather, every rank's values in one header, grew
as W squared and passed the 1 MiB header cap from 340 workers, and every evaluation of such a
job failed (`the ranks' values together make a reply header of 1113040 bytes` at 350).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import zmq
from ps_helpers import raw_dealer

from distconv.data import DataError
from distconv.evaluation_sums import evaluate_shares
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.wire import pack, unpack_header
from tests.unguarded import unguarded

pytestmark = pytest.mark.timeout(120)

WORLD = 400  # past the 340 at which one place per rank passed the header cap


class _BareRank:
    """Rank ``rank`` of ``world``: the real client's ``allreduce_sum`` over a gather written on
    a bare socket to shard 0."""

    closed = False
    _set_up = True  # its setup completed: the sums are served

    def __init__(self, sock: zmq.Socket, rank: int, world: int) -> None:
        self.sock, self.rank, self.world_size, self._count = sock, rank, world, 0
        self.allreduce_sum = unguarded(PServerSync.allreduce_sum).__get__(self)

    def _gather(self, kind: str, value, answer: str = "values"):
        self._count += 1
        tag = f"{kind}:{self._count}"
        head = {"op": "gather", "id": self._count, "job": "local", "rank": self.rank, "tag": tag}
        self.sock.send_multipart(pack({**head, "value": value}))
        assert self.sock.poll(60_000), f"rank {self.rank}: no answer to {tag} within 60 s"
        reply = unpack_header(self.sock.recv_multipart()[0], request=False)
        assert reply["op"] == "ok", reply.get("error")
        return reply[answer]


def _on_every_rank(endpoint: str, work) -> list:
    """``work(sync)`` for each of ``WORLD`` ranks, in threads: its result, or the exception it
    raised."""
    ctx = zmq.Context()
    socks = [raw_dealer(ctx, endpoint) for _ in range(WORLD)]
    results: list = [None] * WORLD

    def body(rank: int) -> None:
        try:
            results[rank] = work(_BareRank(socks[rank], rank, WORLD))
        except Exception as exc:  # noqa: BLE001 - the test reads each rank's outcome
            results[rank] = exc

    threads = [threading.Thread(target=body, args=(r,)) for r in range(WORLD)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
    finally:
        for sock in socks:
            sock.close(0)
        ctx.term()
    return results


def _evaluate_on_every_rank(endpoint: str, handed) -> list:
    """Each rank's ``evaluate_shares`` of ``handed(rank)`` (each example costs 1, every answer
    right): its result, or the exception it raised."""

    def forward(arrays, rows):
        return np.float64(len(rows)), len(rows)

    return _on_every_rank(
        endpoint,
        lambda sync: evaluate_shares(forward, handed(sync.rank), sync, 8, True, "float32"),
    )


def test_the_epochs_fold_of_400_workers_sums_through_shard_0(shards):
    """The epoch's fold sums 2 W + 2 values from each rank (its loss and presence at its own
    place): shard 0 answered with every rank's list, W (2 W + 2) floats in one header, over the
    cap from about 240 workers, so such a job failed its first fold; it answers with the sum."""
    (endpoint,) = shards.start(1, workers=WORLD)

    def fold(sync) -> list[float]:
        mine, here = [0.0] * WORLD, [0.0] * WORLD
        mine[sync.rank], here[sync.rank] = 0.5 + sync.rank, 1.0
        return sync.allreduce_sum([1.0, 2.0, *mine, *here])

    expected = [float(WORLD), 2.0 * WORLD, *(0.5 + r for r in range(WORLD)), *[1.0] * WORLD]
    assert _on_every_rank(endpoint, fold) == [expected] * WORLD


def test_a_job_of_400_workers_evaluates_through_shard_0(shards):
    (endpoint,) = shards.start(1, workers=WORLD)
    whole = {"image": np.arange(1000.0).reshape(500, 2), "label": np.arange(500) % 3}
    results = _evaluate_on_every_rank(endpoint, lambda rank: whole)
    assert results == [{"test_loss": 1.0, "test_acc": 1.0}] * WORLD


def test_one_of_400_workers_handed_another_set_stops_every_rank(shards):
    (endpoint,) = shards.start(1, workers=WORLD)
    whole = {"image": np.arange(1000.0).reshape(500, 2), "label": np.arange(500) % 3}
    other = {"image": whole["image"] + 1, "label": whole["label"]}
    results = _evaluate_on_every_rank(endpoint, lambda rank: other if rank == 123 else whole)
    assert all(isinstance(r, DataError) for r in results), {type(r) for r in results}
    assert str(results[123]).startswith("rank 123 and rank 0 evaluate different sets")
    assert str(results[7]).startswith("rank 7 and another rank evaluate different sets")
