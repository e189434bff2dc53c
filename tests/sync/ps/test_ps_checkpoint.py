"""Checkpoints: a job resumed after a shard dies ends with the weights of an uninterrupted run."""

from __future__ import annotations

import signal

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps
from safetensors.numpy import load_file

from distconv.checkpoint import load_checkpoint, save_checkpoint
from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync

DATA = batches(4, 8)


def _run(endpoints, steps, checkpoint_at=None, optimizer="adam", start=None):
    """Train ``steps`` on 2 workers; ``start`` = (weights, optimizer state) of a checkpoint."""
    nets = [small_net(seed=rank) for rank in range(2)]
    if start is not None:  # the chief restores the checkpoint; the other worker pulls from it
        for p in nets[0].parameters():
            p.value[...] = start[0][p.name]
    saved = {}

    def rank_fn(rank):
        sync = PServerSync(
            create_optimizer(optimizer, lr=0.05),
            rank=rank,
            world_size=2,
            pservers=endpoints,
            insecure=True,
            timeout=20,
            block_bytes=64,
        )
        try:
            sync.setup(nets[rank].parameters(), {"batch": 8})
            if start is not None:
                sync.load_state_dict(start[1])
            train_steps(nets[rank], sync, steps, rank, 2)
            if rank == 0 and checkpoint_at is not None:  # as the Trainer's chief does
                path, step = checkpoint_at
                saved["parts"] = sync.save_remote_parts(step)
                save_checkpoint(path, nets[0].parameters(), sync.state_dict(), step=step)
        finally:
            sync.close()

    run_ranks(rank_fn, 2)
    return {p.name: p.value.copy() for p in nets[0].parameters()}, saved


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])  # sgd: a checkpoint with no state
def test_resume_after_a_shard_dies_equals_an_uninterrupted_run(shards, tmp_path, optimizer):
    straight, _ = _run(shards.start(2, workers=2), DATA, optimizer=optimizer)

    ckpt = tmp_path / "ckpt"
    endpoints = shards.start(2, workers=2, extra=["--checkpoint-dir", str(ckpt)])
    _, saved = _run(endpoints, DATA[:2], (tmp_path / "chief.safetensors", 2), optimizer)
    # each shard wrote its part of step 2 atomically: its blocks' values and optimizer state
    assert sorted(saved["parts"]) == ["pserver-shard0", "pserver-shard1"]
    part = load_file(saved["parts"]["pserver-shard1"])
    assert any(k.endswith(".value") for k in part)
    assert any(k.endswith(".state.m") for k in part) == (optimizer == "adam")

    shards.procs[-1].send_signal(signal.SIGKILL)  # shard 1 dies
    shards.procs[-1].wait()
    shards.procs[-2].send_signal(signal.SIGTERM)  # shard 0 is stopped: writes its last part
    shards.procs[-2].wait(timeout=20)
    assert (ckpt / "pserver-shard0-steplast.safetensors").exists()

    # the whole job restarts from the chief's checkpoint (weights + gathered optimizer state)
    chief = load_checkpoint(tmp_path / "chief.safetensors")
    start = (chief.params, chief.optim_state)
    resumed, _ = _run(shards.start(2, workers=2), DATA[2:], optimizer=optimizer, start=start)
    for name, value in straight.items():
        np.testing.assert_array_equal(resumed[name], value)


def test_shards_without_a_checkpoint_dir_write_no_parts_and_do_not_fail_the_save(shards):
    """The chief's checkpoint holds the shards' state; their own parts are an extra."""
    endpoints = shards.start(1, workers=1)  # no --checkpoint-dir
    sync = PServerSync(
        create_optimizer("sgd"), rank=0, world_size=1, pservers=endpoints, insecure=True
    )
    try:
        sync.setup(small_net().parameters(), {})
        assert sync.save_remote_parts(3) == {}
    finally:
        sync.close()


@pytest.mark.timeout(30)
def test_only_rank_0_asks_for_checkpoint_parts(hand, tmp_path):
    """A checkpoint at a step below the newest prunes the parts above it (a rolled-back
    attempt's): a request of another rank, or of a stray client, must not."""
    h = hand(checkpoint_dir=str(tmp_path), workers=2)
    h.seed()
    assert h.ask({"op": "checkpoint", "step": 7})[0]["op"] == "ok"
    reply = h.ask({"op": "checkpoint", "step": 3, "rank": 1})[0]
    assert reply["op"] == "error" and "only rank 0 writes checkpoints, got rank 1" in reply["error"]
    assert [p.name for p in tmp_path.iterdir()] == ["pserver-shard0-step7.safetensors"]


@pytest.mark.timeout(60)
def test_a_shard_prunes_its_old_parts_without_a_line_each_checkpoint(shards, tmp_path):
    """Each shard logged "pruned old checkpoint part(s)" at INFO at every checkpoint, with
    short epochs most of the launcher's output: it is DEBUG now."""
    parts = tmp_path / "parts"
    (endpoint,) = shards.start(1, workers=1, extra=["--checkpoint-dir", str(parts)])
    net, sync = small_net(), insecure_worker([endpoint], optimizer="adam")
    try:
        sync.setup(net.parameters())
        for step in (10, 20, 30):
            sync.save_remote_parts(step, keep=1)
    finally:
        sync.close()
    assert [p.name for p in parts.iterdir()] == ["pserver-shard0-step30.safetensors"]
    shards.stop()
    said = shards.log_text()
    assert "listening on" in said and "pruned" not in said, said  # INFO is logged, not this
