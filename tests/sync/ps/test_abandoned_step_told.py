"""A worker whose sync step raised tells the shards at ``abandon_step``, not only at its ``bye``:
the rank waiting in that step stops at once, naming the error, though the worker that raised
stays alive without closing (a script that catches the error and goes on, an interactive
session) or ends without ``close()``. Real shards, real workers (threads of this process).

Before, the shards learnt of it only at the worker's ``bye``, at its process's end (on the
shard's host alone, named "killed or crashed") or at their ``--timeout`` (60 s by default,
"sent nothing"), and the rank waiting in the step waited that long."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from ps_helpers import (
    batches,
    insecure_worker,
    run_ranks,
    script_ranks,
    served,
    small_net,
    train_steps,
)

from distconv.arg import Arg
from distconv.data import DataError
from distconv.sync.peers import PeerFailed
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard

#: the shards' --timeout, far over what the test takes: without the note, rank 1 waits it out
TIMEOUT = 120
#: rank 0's error, which the shard's words quote
ERROR = "DataError: rows of the other kind in rank 0's batch"


def _cut_short(net, sync, batch, rank: int) -> None:
    """One step of ``rank`` of two that raises after its forward, before any gradient, as the
    Trainer's step does: the sync abandons it while the error propagates."""
    x, y = batch
    sync.start_step(len(y[rank::2]))
    try:
        net.forward({"image": Arg(x[rank::2], needs_grad=False),
                     "label": Arg(ids=y[rank::2], needs_grad=False)})  # fmt: skip
        raise DataError("rows of the other kind in rank 0's batch")
    except DataError:
        sync.abandon_step()


def _rank_0_cut_while_rank_1_trains(endpoints, data, cut, then=None) -> dict[str, object]:
    """Two workers train ``data[:1]``; then rank 0 runs ``cut(net, sync, told)`` (a step it
    abandons), stays alive and unclosed until rank 1 has stopped, and runs ``then(sync)``
    where given, while rank 1 trains on ``data[1:]`` until told. Returns ``told``: what
    ``cut`` recorded, and what rank 1 was told (``at``, ``error``, ``ranks``)."""
    rank_1_done = threading.Event()
    told: dict[str, object] = {}

    def rank(r: int) -> None:
        net, sync = small_net(), insecure_worker(endpoints, r, 2, timeout=TIMEOUT)
        try:
            sync.setup(net.parameters(), {"batch": 8})
            train_steps(net, sync, data[:1], r, 2)
            if r == 0:
                cut(net, sync, told)
                rank_1_done.wait(30)  # alive, not closed, until rank 1 has stopped
                if then is not None:
                    then(sync)
                return
            try:
                train_steps(net, sync, data[1:], 1, 2)
            except PeerFailed as exc:
                told["at"], told["error"], told["ranks"] = time.monotonic(), str(exc), exc.ranks
            finally:
                rank_1_done.set()
        finally:
            sync.close()

    run_ranks(rank, 2, timeout=50)
    return told


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_shards", [1, 2])
def test_the_rank_waiting_in_an_abandoned_step_is_told_at_once(shards, num_shards):
    endpoints = shards.start(num_shards, workers=2, extra=["--timeout", str(TIMEOUT)])
    data = batches(3, 8)

    def cut(net, sync, told) -> None:
        told["abandoned"] = time.monotonic()
        _cut_short(net, sync, data[1], 0)

    told = _rank_0_cut_while_rank_1_trains(endpoints, data, cut)
    assert "error" in told, "rank 1 was not stopped"
    said = told["error"]
    assert told["ranks"] == (0,), told
    assert "rank 0 (host " in said and f'abandoned step 2 on "{ERROR}"' in said, said
    assert "rank 1 (step 2) waits for its push, and the step cannot complete without it" in said
    assert told["at"] - told["abandoned"] < 5, told  # not at the timeout
    assert f'abandoned step 2 on "{ERROR}"' in shards.log_text()


@pytest.mark.timeout(60)
def test_a_script_that_never_closes_its_sync_still_names_its_error(shards):
    """``mid_step_worker.py --no-close``: rank 0 is refused by ``loss_rows_checked`` in its
    second step and its process ends without a ``bye``. Before, the shard (on the same host)
    saw the process end a second later and said "killed (SIGKILL, out of memory) or crashed";
    on another host, rank 1 waited for the timeout."""
    (endpoint,) = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    worker = Path(__file__).with_name("mid_step_worker.py")
    (status0, err0), (status1, err1) = script_ranks(
        [sys.executable, str(worker), "--no-close"], endpoint, 30
    )
    assert status0 == 1 and "mid_step_worker.py: error: DataError: " in err0, err0[-3000:]
    last = err1.strip().splitlines()[-1]
    assert status1 == 75, err1[-3000:]
    assert "rank 0 (host " in last and 'abandoned step 2 on "DataError: SoftmaxCrossEntropy' in last
    assert "killed" not in last, last


class _Unwritable(Exception):
    """An error whose message cannot be written: its ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no words for it")


@pytest.mark.timeout(60)
def test_an_error_whose_message_cannot_be_written_is_told_by_its_type(shards):
    """``abandon_step`` must not raise (the contract): where the step's error cannot say its
    message, the note names its type, as a failed setup's note does. Before, writing the note
    raised the ``__str__``'s RuntimeError out of ``abandon_step``, in place of the step's
    error, and sent nothing; a ``close`` on such an error raised it too, and said no bye."""
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])

    def cut(net, sync, told) -> None:
        sync.start_step(4)
        try:
            raise _Unwritable()
        except _Unwritable:
            sync.abandon_step()

    def then(sync) -> None:
        try:
            raise _Unwritable()
        except _Unwritable:
            sync.close()  # its bye carries the same words: close does not raise either

    told = _rank_0_cut_while_rank_1_trains(endpoints, batches(2, 8), cut, then)
    assert told.get("ranks") == (0,), told
    said = 'abandoned step 2 on "_Unwritable (its text could not be made)"'
    assert said in str(told["error"]), told


@pytest.mark.timeout(60)
def test_ranks_that_abandoned_a_step_set_up_again_and_train_it(shards):
    """Both ranks abandon step 2 before any push (an error every rank meets), which fails no
    step; both set up again (a fit after a failed fit) and train steps numbered from 1 again
    (``start_at(0)``, as a new fit's Trainer says), step 2 among them: the notes ended at
    their hellos. Kept, a rank's note failed the other's held push of the new step 2."""
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    data = batches(3, 8)

    def rank(r: int) -> None:
        net, sync = small_net(), insecure_worker(endpoints, r, 2, timeout=TIMEOUT)
        try:
            sync.setup(net.parameters(), {"batch": 8})
            train_steps(net, sync, data[:1], r, 2)
            sync.start_step(4)
            try:
                raise DataError("rows of the other kind on every rank")
            except DataError:
                sync.abandon_step()
            sync.setup(net.parameters(), {"batch": 8})
            sync.start_at(0)
            train_steps(net, sync, data[1:], r, 2)
        finally:
            sync.close()

    run_ranks(rank, 2, timeout=50)
    assert "job failed" not in shards.log_text(), shards.log_text()[-3000:]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_only_a_sync_worker_sends_an_abandon(mode):
    """In async mode nothing waits for a push, and a worker sends no ``abandon``: the shard
    (served here, its state read) holds no note after a step abandoned, where a sync one holds
    the step and the error. A sum after it is answered after whatever came before."""
    config = ShardConfig(bind="127.0.0.1:0", workers=1, insecure=True, mode=mode, timeout=20)
    with served(Shard(config)) as shard:
        net, sync = small_net(), insecure_worker([shard.endpoint], timeout=20)
        try:
            sync.setup(net.parameters())
            sync.start_step(4)
            try:
                raise DataError("rows of the other kind")
            except DataError:
                sync.abandon_step()
            sync.allreduce_sum([1.0])  # an evaluation's, after the step: one round trip
            notes = dict(shard.abandoned)
        finally:
            sync.close()
    sent = {0: (1, "DataError: rows of the other kind", [])}
    assert notes == (sent if mode == "sync" else {}), notes
