"""A script that fits again after another rank's worker was killed and started again (a second
``setup`` of its worker, told of the restart or not): a real shard and real workers
(``PServerSync`` in threads). The shard's rules, with the order pinned, are in
``test_ps_run_ended_by_restart.py``."""

from __future__ import annotations

import threading

import pytest
from ps_helpers import batches, insecure_worker, small_net, train_steps

from distconv.sync.peers import PeerFailed


def _in_threads(body, args) -> None:
    threads = [threading.Thread(target=body, args=(a,), daemon=True) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join(40)


@pytest.mark.timeout(90)
def test_the_ranks_that_fit_again_train_on_with_the_restarted_one(shards):
    """Async: rank 2's worker stops after two steps without a bye (killed) and a new one
    starts; ranks 0 and 1 catch what they are told, if the restart reached them first, set up
    again and train a step with it. They were refused for good ("rank 2 started again ...;
    this worker's gather is refused"), or the restart dropped their start-up gather, and the
    new worker failed at the shard's timeout."""
    endpoints = shards.start(1, workers=3, mode="async", extra=["--timeout", "10"])
    data = batches(4, 6)
    nets = [small_net() for _ in range(4)]  # the fourth: rank 2's new worker's
    syncs = [insecure_worker(endpoints, rank, 3, timeout=10) for rank in (0, 1, 2, 2)]
    outcome: dict[int, str] = {}

    def first_fit(rank: int) -> None:
        syncs[rank].setup(nets[rank].parameters())
        train_steps(nets[rank], syncs[rank], data[:2], rank, 3)

    def fit_again(worker: int) -> None:  # 3: rank 2's new worker, its first fit
        try:
            if worker < 2:
                try:
                    train_steps(nets[worker], syncs[worker], data[2:3], worker, 3)
                except PeerFailed:
                    pass  # told of rank 2's restart: the script fits again
            syncs[worker].setup(nets[worker].parameters())
            train_steps(nets[worker], syncs[worker], data[3:], min(worker, 2), 3)
            outcome[worker] = "trained"
        except Exception as exc:  # the test's report
            outcome[worker] = f"{type(exc).__name__}: {exc}"

    try:
        _in_threads(first_fit, range(3))
        _in_threads(fit_again, (0, 1, 3))  # syncs[2], the killed worker, says nothing more
        assert outcome == dict.fromkeys((0, 1, 3), "trained"), outcome
    finally:
        for sync in syncs:
            sync.close()
