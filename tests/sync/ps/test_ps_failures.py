"""Failures: a dead worker is named, NaN gradients and stale pushes are refused, bad frames too."""

from __future__ import annotations

import signal

import numpy as np
import pytest
from ps_helpers import batches, run_ranks, small_net, train_steps, worker_process

from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.ps.client import PServerSync


def _sync(endpoints, rank=0, world=1, **kw):
    kw.setdefault("timeout", 10)
    return PServerSync(create_optimizer("sgd", lr=0.05), rank=rank, world_size=world,
                       pservers=endpoints, insecure=True, block_bytes=64, **kw)  # fmt: skip


@pytest.mark.timeout(90)
def test_a_killed_worker_is_named_and_the_job_stops(shards, tmp_path):
    # the shards' silence limit is far above the victim's start-up, however loaded the machine
    # (at 2 s a victim still importing was given up on for its silence, not named by its end)
    endpoints = shards.start(2, workers=2, extra=["--timeout", "20"])
    victim = worker_process(endpoints, 1, 2, 1000, tmp_path)
    try:
        net, sync = small_net(), _sync(endpoints, 0, 2)

        def rank0(_):
            try:
                sync.setup(net.parameters(), {"batch": 8})
                train_steps(net, sync, batches(1000, 8), 0, 2)
            finally:
                sync.close()

        def kill_after_three(_):
            for line in victim.stdout:
                if line.strip() == "step 3":
                    victim.send_signal(signal.SIGKILL)
                    return

        # rank "0" trains; rank "1" of this helper watches the victim and kills it
        with pytest.raises(SyncError) as err:
            run_ranks(lambda r: rank0(r) if r == 0 else kill_after_three(r), 2, timeout=60)
    finally:
        victim.kill()
        victim.wait()
        victim.stdout.close()
        victim.stderr.close()
    message = str(err.value)
    # on this host the shard sees the process end (distconv.sync.ps.processes), before the 20 s
    assert "rank 1 (host" in message and "last step" in message
    assert f"its process (pid {victim.pid}, on this host) ended without a bye" in message
    # every shard that waited for rank 1 stopped the job with the same cause
    assert shards.log_text().count("job failed: rank 1 (host") >= 1


def test_nan_gradient_is_refused_naming_parameter_and_rank(shards):
    endpoints = shards.start(1, workers=1)
    net, sync = small_net(), _sync(endpoints)
    try:
        sync.setup(net.parameters())
        param = net.parameters()[2]
        sync.start_step(4)
        param.grad[...] = 0.0
        param.grad.flat[3] = np.nan
        sync.on_gradient(param)
        said = (
            f"the update diverged at step 1 .a non-finite gradient of {param.name}: "
            "rank 0's part is not"
        )
        with pytest.raises(SyncError, match=said):
            sync.finish_step()
    finally:
        sync.close()


def test_stale_and_duplicate_pushes_get_an_error_and_the_shard_keeps_serving(shards):
    endpoints = shards.start(1, workers=1)
    net, sync = small_net(), _sync(endpoints)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(2, 4))
        sync._step = 1  # replay step 1: the shard has applied it already
        with pytest.raises(
            SyncError, match=r"stale push: rank 0 pushed \S+ for step 2, done already"
        ):
            train_steps(net, sync, batches(1, 4))
        sync._step = 5
        train_steps(net, sync, batches(1, 4))  # a fresh step still trains
        assert sync.shard_stats()[0]["errors"] >= 1
    finally:
        sync.close()


def test_a_worker_of_another_job_is_refused_and_every_rank_stops(shards):
    endpoints = shards.start(1, workers=2, extra=["--timeout", "3"])
    syncs = [_sync(endpoints, 0, 2), _sync(endpoints, 1, 2)]

    def rank_fn(rank):
        try:
            syncs[rank].setup(small_net().parameters(), {"batch": 8 * (rank + 1)})
        except SyncError as exc:
            return str(exc)
        finally:
            syncs[rank].close()

    messages = run_ranks(rank_fn, 2)
    # whichever rank said hello second is told the first difference; the other is told it is gone
    assert any(
        "config.batch: 16 here, 8 there" in m or "config.batch: 8 here, 16 there" in m
        for m in messages
    ), messages
    assert all(m and ("config.batch" in m or "(host " in m) for m in messages), messages


@pytest.mark.timeout(30)
def test_a_reply_nobody_waits_for_any_more_is_not_kept(shards):
    """Shard 0 refuses its part of a request to both shards at once, so the worker raises
    before shard 1's reply is read: that reply, already here or still to come, is dropped
    instead of staying in the worker's reply table for the rest of the run."""
    endpoints = shards.start(2, workers=1)
    sync = _sync(endpoints)
    try:
        for _ in range(3):
            asks = [(0, {"op": "checkpoint", "step": 1}, ()), (1, {"op": "stats"}, ())]
            with pytest.raises(SyncError, match="has no --checkpoint-dir"):
                sync._ask_all(asks, "a checkpoint")
        assert len(sync.shard_stats()) == 2  # a later request: every late reply read by now
        assert not sync._replies and not sync._replies_dropped and not sync._rid_shard
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_ranks_that_sum_different_numbers_of_values_are_told_so(shards):
    """The sum zipped the ranks' lists, so a rank sending fewer values (other code, another
    point of the job) shortened every rank's sums without a word."""
    endpoints = shards.start(1, workers=2)
    syncs = [_sync(endpoints, rank, 2) for rank in range(2)]

    def rank_fn(rank):
        try:
            syncs[rank].setup(small_net().parameters(), {"batch": 8})
            try:
                syncs[rank].allreduce_sum([1.0, 2.0, 3.0][: 3 - rank])
            except SyncError as exc:
                return str(exc)
            return None
        finally:
            syncs[rank].close()

    why = "the ranks sum different numbers of values: rank 0 sent 3, rank 1 sent 2"
    assert all(why in message for message in run_ranks(rank_fn, 2))
