"""StepCheckpoints.save refuses what the chief's save would refuse (a step, an epoch or a count
of the state that is no count) before it asks the shards to write their parts: those went
first, so a refused checkpoint left an orphan part of its step on each shard's disk, and a step
of 2.5 then a bare ValueError from the step directory's name."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.resume import Position, StepCheckpoints
from distconv.run_dir import RunDirectory
from distconv.sync import SyncError, create_sync

pytestmark = pytest.mark.timeout(30)


def _checkpoints(tmp_path, monkeypatch) -> tuple[StepCheckpoints, list[int]]:
    """A run's checkpoints, opened, whose sync records each step its shards are asked for."""
    params = [Parameter("w", np.ones(3))]
    sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.1))
    sync.setup(params)
    asked: list[int] = []
    monkeypatch.setattr(sync, "save_remote_parts", lambda step, keep: asked.append(step) or {})
    ckpts = StepCheckpoints(RunDirectory(tmp_path / "run", keep=2), params, sync, {"seed": 0})
    ckpts.open(False)
    ckpts.save(Position(0, 1, 1), {})
    return ckpts, asked


def _only_step_1_left(ckpts: StepCheckpoints, asked: list[int]) -> None:
    assert asked == [1]  # the good step's parts only
    assert [m.step for m in ckpts.run.manifests()] == [1]
    root = ckpts.run.checkpoint_root
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["step-00000001"]


@pytest.mark.parametrize(
    "pos, said",
    [
        (Position(epoch=0, step=-1), "step -1: holds -1"),
        (Position(epoch=0, step=2.5), "step 2.5: holds 2.5"),
        (Position(epoch=-1, step=3), "epoch -1: holds -1"),
        (Position(epoch=None, step=3), "epoch None: a NoneType given"),
        (Position(epoch="1", step=3), "epoch '1': a str given"),
    ],
    ids=["step -1", "step 2.5", "epoch -1", "epoch None", "epoch str"],
)
def test_a_refused_count_asks_no_shard_for_a_part(tmp_path, monkeypatch, pos, said):
    ckpts, asked = _checkpoints(tmp_path, monkeypatch)
    try:
        with pytest.raises(CheckpointError, match=said) as refused:
            ckpts.save(pos, {})
        _only_step_1_left(ckpts, asked)
        assert f"checkpoint of step {pos.step} in {ckpts.run.checkpoint_root}" in str(refused.value)
    finally:
        ckpts.close()


def test_a_state_count_refused_asks_no_shard_for_a_part(tmp_path, monkeypatch):
    ckpts, asked = _checkpoints(tmp_path, monkeypatch)
    state = {"w": {**ckpts.sync.checkpoint_state()["w"], "step": np.int64(-1)}}
    monkeypatch.setattr(ckpts.sync, "checkpoint_state", lambda: state)
    try:
        with pytest.raises(CheckpointError, match=r"step-00000002/chief.safetensors: .*w/step"):
            ckpts.save(Position(0, 2, 2), {})
        _only_step_1_left(ckpts, asked)
    finally:
        ckpts.close()


def test_a_shard_that_fails_its_part_leaves_no_chief_part_nor_manifest(tmp_path, monkeypatch):
    """The chief's part is written before the shards are asked: a shard that fails (SyncError)
    must take it away again, so no step directory outlives the refused checkpoint."""
    ckpts, asked = _checkpoints(tmp_path, monkeypatch)

    def shard_fails(step, keep):
        asked.append(step)
        raise SyncError("shard 0 cannot write its part")

    monkeypatch.setattr(ckpts.sync, "save_remote_parts", shard_fails)
    try:
        with pytest.raises(SyncError, match="shard 0 cannot write"):
            ckpts.save(Position(0, 2, 2), {})
        assert asked == [1, 2]
        assert [m.step for m in ckpts.run.manifests()] == [1]
        root = ckpts.run.checkpoint_root
        assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["step-00000001"]
    finally:
        ckpts.close()
