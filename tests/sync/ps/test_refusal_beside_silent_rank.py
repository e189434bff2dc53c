"""A gather's timeout where one missing rank left on the ranks' different jobs and another is
silent leads with the refusal, and names the silent rank too.

Three ranks: rank 2 says hello first (its job is the job) and then hangs, silent; rank 1 runs
another job (refused at its hello, it closes on the mismatch); rank 0 says hello last and waits
in the start-up gather (a refusal before its hello is left to the timeout: it may be of a run
before). At the shard's --timeout rank 0 heard a plain timeout ('ranks 1, 2 sent nothing'), no
word of the mismatch: the silent rank kept the known cause from leading, though a restart would
only stop on it again. It now leads, as a refusal of the job (``refused: job``); the silent
rank is still named and blamed (``failed_ranks``), as at any timeout, so the waiting rank
stops as on a peer's failure. Real workers (threads) on a real shard served on a thread."""

from __future__ import annotations

import threading

import pytest
from ps_helpers import insecure_worker, run_ranks, served, small_net
from test_ps_other_job_three_ranks import DIFF, _until

from distconv.sync.base import SyncError
from distconv.sync.peers import PeerFailed
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard

#: the shard's --timeout, which rank 0 waits out (rank 2 may yet come until then)
SHARD_TIMEOUT = 1.0


@pytest.mark.timeout(60)
def test_the_timeout_leads_with_the_refusal_and_names_the_silent_rank():
    config = ShardConfig(bind="127.0.0.1:0", workers=3, insecure=True, timeout=SHARD_TIMEOUT)
    woken = threading.Event()  # rank 2 hangs after its hello until rank 0 has its answer
    with served(Shard(config)) as shard:

        def rank_fn(rank: int) -> SyncError:
            if rank < 2:  # each once the rank after it was heard: 2's hello, 1's bye
                _until(lambda: rank + 1 in (shard.left if rank == 0 else shard.hosts), "it")
            sync = insecure_worker([shard.endpoint], rank, 3, timeout=20)
            if rank == 2:
                hello = sync._hello
                sync._hello = lambda description: (hello(description), woken.wait(30))[0]
            try:
                sync.setup(small_net().parameters(), {"batch": 9 if rank == 1 else 8})
            except SyncError as exc:
                return exc
            finally:
                woken.set() if rank == 0 else None
                sync.close()
            raise AssertionError(f"rank {rank} set up a job whose ranks differ")

        waited, refused, _ = run_ranks(rank_fn, 3, timeout=40)
    said = str(waited).partition(f"pserver {shard.endpoint}: ")[2]
    assert said.startswith(f"rank 1 and rank 2 run different jobs: {DIFF}"), said
    assert "rank 2 (host " in said and "sent nothing for all_equal:1" in said, said
    assert isinstance(waited, PeerFailed) and list(waited.ranks) == [2], repr(waited)
    assert f"run different jobs: {DIFF}" in str(refused), refused
