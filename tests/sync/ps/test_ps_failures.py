"""Failures: a dead worker is named, NaN gradients and stale pushes are refused, bad frames too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ps_helpers import REPO_ROOT, batches, run_ranks, small_net, train_steps

from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.ps.client import PServerSync

WORKER = Path(__file__).with_name("ps_worker.py")


def _worker(endpoints, rank, world, steps, tmp_path, timeout=10.0):
    return subprocess.Popen(
        [sys.executable, str(WORKER), ",".join(endpoints), str(rank), str(world), str(steps),
         "sgd", "-", str(timeout), str(tmp_path / f"worker{rank}.npz")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": f"{REPO_ROOT}:{WORKER.parent}", "OMP_NUM_THREADS": "1"},
    )  # fmt: skip


def _sync(endpoints, rank=0, world=1, **kw):
    kw.setdefault("timeout", 10)
    return PServerSync(create_optimizer("sgd", lr=0.05), rank=rank, world_size=world,
                       pservers=endpoints, insecure=True, block_bytes=64, **kw)  # fmt: skip


@pytest.mark.timeout(90)
def test_a_killed_worker_is_named_and_the_job_stops(shards, tmp_path):
    endpoints = shards.start(2, workers=2, extra=["--timeout", "2"])
    victim = _worker(endpoints, 1, 2, 1000, tmp_path)
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
    assert "rank 1 (host" in message and "last step" in message and "within 2 s" in message
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
        with pytest.raises(SyncError, match=f"{param.name} from rank 0 is not finite"):
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
        with pytest.raises(SyncError, match="stale push: step 2 of parameter"):
            train_steps(net, sync, batches(1, 4))
        sync._step = 5
        train_steps(net, sync, batches(1, 4))  # a fresh step still trains
        assert sync.shard_stats()[0]["errors"] >= 1
    finally:
        sync.close()


def test_a_worker_of_another_job_is_refused_at_hello(shards):
    endpoints = shards.start(1, workers=2, extra=["--timeout", "30"])
    a, b = _sync(endpoints, 0, 2), _sync(endpoints, 1, 2)
    try:
        nets = [small_net(), small_net()]
        errors = {}

        def rank_fn(rank):
            sync, config = (a, {"batch": 8}) if rank == 0 else (b, {"batch": 16})
            try:
                sync.setup(nets[rank].parameters(), config)
            except SyncError as exc:
                errors[rank] = str(exc)

        run_ranks(rank_fn, 2)
        # whichever rank said hello second is refused, naming the difference; the other one
        # then waits for a peer that never comes, and says so within the timeout
        refused = [m for m in errors.values() if "runs another job" in m]
        assert len(refused) == 1 and "config.batch" in refused[0], errors
    finally:
        a.close()
        b.close()
