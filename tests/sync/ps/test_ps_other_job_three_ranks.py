"""Three workers, rank 1 running another job: every rank hears at once that the jobs differ.

With two workers, rank 1's refused hello and its bye both come after rank 0's hello, and the
shard counts that bye. With a third, rank 2 may say hello after rank 1's refused
one and wait in the start-up gather before rank 1's bye comes, or say hello after that bye: the
shard took the bye for one of a run before, and ranks 0 and 2 waited in the start-up gather for
the whole --timeout, then failed naming rank 1 closed (an older fault, found in review). The
refused rank's own reply leads with the words the waiting ranks (and MPI's ranks) get. Real
workers (threads) on a real shard served on a thread of this process, whose held gathers and
byes the test reads to order the requests (ZeroMQ orders no two workers' messages), not sleeps.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import pytest
from ps_helpers import insecure_worker, run_ranks, served, small_net

from distconv.sync.base import SyncError
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard

#: the shard's --timeout: a waiting rank that hears nothing before it has waited it out
SHARD_TIMEOUT = 4.0
DIFF = "config.batch: 9 here, 8 there"


def _served(workers: int) -> contextlib.AbstractContextManager[Shard]:
    """A shard for ``workers`` ranks served on a thread of this process."""
    config = ShardConfig(bind="127.0.0.1:0", workers=workers, insecure=True, timeout=SHARD_TIMEOUT)
    return served(Shard(config))


def _until(seen: Callable[[], bool], what: str) -> None:
    """Wait until ``seen()`` (read from the shard's thread's state: a dict it changes may
    change size while read, read again then)."""
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(RuntimeError):
            if seen():
                return
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.005)


def _job(shard: Shard, bye_first: bool) -> list[tuple[str, float]]:
    """Ranks 0, 1 (batch 9: another job) and 2 set up, their hellos in that order. Rank 1's
    bye comes once ranks 0 and 2 wait in the start-up gather; or (``bye_first``) before rank
    2's hello, and rank 0's gather after rank 2's. Each rank's error, and when it came."""
    answered = {rank: threading.Event() for rank in range(3)}  # its hello came back
    start = time.monotonic()

    def gathering(*ranks: int) -> Callable[[], bool]:
        return lambda: any(set(ranks) <= set(h.by_rank) for h in list(shard.waiting.values()))

    def rank_fn(rank: int) -> tuple[str, float]:
        if rank > 0:
            assert answered[rank - 1].wait(30), f"rank {rank - 1}'s hello never came back"
        if rank == 2 and bye_first:
            _until(lambda: 1 in shard.left, "rank 1's bye")
        sync = insecure_worker([shard.endpoint], rank, 3, timeout=30)
        hello = sync._hello

        def hello_then_go(description):
            try:
                return hello(description)
            finally:
                answered[rank].set()
                if rank == 1 and not bye_first:  # its bye once ranks 0 and 2 wait
                    _until(gathering(0, 2), "ranks 0 and 2 in the start-up gather")

        sync._hello = hello_then_go
        if rank == 0 and bye_first:  # its gather once rank 2 waits in it
            gather = sync._gather

            def gather_after_2(*args, **kwargs):
                _until(gathering(2), "rank 2 in the start-up gather")
                return gather(*args, **kwargs)

            sync._gather = gather_after_2
        try:
            sync.setup(small_net().parameters(), {"batch": 9 if rank == 1 else 8})
        except SyncError as exc:
            return str(exc), time.monotonic() - start
        finally:
            sync.close()
        raise AssertionError(f"rank {rank} set up a job whose ranks differ")

    return run_ranks(rank_fn, 3, timeout=40)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bye_first", [False, True], ids=["gathering", "bye-first"])
def test_every_rank_hears_at_once_that_rank_1_runs_another_job(bye_first):
    with _served(workers=3) as shard:
        said = _job(shard, bye_first)
    both = f"rank 1 and rank 0 run different jobs: {DIFF} (here: rank 1's hello; there: rank 0's"
    assert both in said[1][0], said[1][0]  # the refused rank, in the same words
    for rank in (0, 2):
        message, when = said[rank]
        assert message.partition(f"pserver {shard.endpoint}: ")[2].startswith(both), message
        assert when < SHARD_TIMEOUT, f"rank {rank} heard after {when:.1f} s: {message}"
