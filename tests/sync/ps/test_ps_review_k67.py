"""Review k67: a worker that closes after part of its step reached a shard; healthy ends and
whole-job restarts against running shards must not fail."""

from __future__ import annotations

import threading
import time

import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.arg import Arg
from distconv.sync.base import SyncError

TIMEOUT = 60


class Boom(RuntimeError):
    pass


def _partial_job(endpoints, push_bytes=0):
    """Rank 1 trains 2 steps, then in step 3 sends its first gradient (push_bytes 0: it leaves
    at once) and raises; rank 0 trains 4 steps. Returns (rank 0's error, seconds it took)."""
    data = batches(4, 8)
    out = {}

    def run(rank):
        net = small_net()
        sync = insecure_worker(endpoints, rank, 2, timeout=TIMEOUT)
        sync.push_bytes = push_bytes
        began = time.monotonic()
        try:
            sync.setup(net.parameters(), {"batch": 8})
            if rank == 0:
                try:
                    train_steps(net, sync, data, 0, 2)
                except SyncError as exc:
                    out["error"] = str(exc)
                out["seconds"] = time.monotonic() - began
                return
            train_steps(net, sync, data[:2], 1, 2)
            x, y = data[2]
            xs, ys = x[1::2], y[1::2]
            sync.start_step(len(ys))
            sent = []

            def callback(param):
                if sent:
                    time.sleep(0.3)  # the first push has reached the shard
                    raise Boom("out of memory in backward")
                sync.on_gradient(param)
                sent.append(param.name)

            net.forward({"image": Arg(xs, needs_grad=False), "label": Arg(ids=ys, needs_grad=False)})
            try:
                net.backward(callback, loss="loss", loss_scale=len(ys))
            except Boom:
                out["rank1"] = "raised"
                raise
        finally:
            try:
                sync.close()
            except Exception:
                pass

    def guarded(rank):
        try:
            run(rank)
        except Boom:
            pass

    run_ranks(guarded, 2, timeout=100)
    return out


@pytest.mark.timeout(100)
@pytest.mark.parametrize("num_shards", [1])
def test_a_worker_that_raised_after_part_of_its_step_left_ends_the_job_at_once(shards, num_shards):
    endpoints = shards.start(num_shards, workers=2, extra=["--timeout", str(TIMEOUT)])
    out = _partial_job(endpoints)
    assert out.get("rank1") == "raised", out
    assert "error" in out and out["seconds"] < TIMEOUT / 2, out
    assert "closed on Boom: out of memory in backward" in out["error"], out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("push_bytes", [0, 64])
def test_healthy_jobs_then_a_whole_job_restart_against_running_shards_do_not_fail(
    shards, push_bytes
):
    """Several shards, a step in several messages, one rank always later; then new workers of
    both ranks against the same shards, rank 1 starting late (rank 0 seeds again)."""
    endpoints = shards.start(3, workers=2, extra=["--timeout", str(TIMEOUT)])
    data = batches(5, 8)
    for run_number in range(3):
        delay = threading.Event()

        def run(rank):
            if rank == 1 and run_number:
                time.sleep(0.5)
            net, sync = small_net(), insecure_worker(endpoints, rank, 2, timeout=TIMEOUT)
            sync.push_bytes = push_bytes
            try:
                sync.setup(net.parameters(), {"batch": 8})
                for k in range(len(data)):
                    if rank == 1:
                        time.sleep(0.02)
                    train_steps(net, sync, data[k : k + 1], rank, 2)
                if rank == 0:
                    time.sleep(0.2)  # rank 1's bye first
            finally:
                sync.close()

        run_ranks(run, 2, timeout=60)
        del delay
    assert "job failed" not in shards.log_text()


@pytest.mark.timeout(30)
def test_the_error_a_bye_carries_is_cut_to_one_short_line_by_the_shard(hand):
    """The shard does not trust a worker to have cut its error (another client, an older
    one): every later message quotes it, and the shard's log writes it."""
    from test_ps_stuck import _bye, _hello, _push_w

    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    h.seed()
    _bye(h, 1, error="Boom: line one\nline two " + "x" * 20000)
    _push_w(h, 0, 1)
    assert h.shard.failed and "closed on Boom: line one line two xx" in h.shard.failed
    assert "\n" not in h.shard.failed and len(h.shard.failed) < 600, len(h.shard.failed)
