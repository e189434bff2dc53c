"""The values an async chief's checkpoint writes are the values it checks for NaN/inf.

``StepCheckpoints.save`` pulls every block (``refresh_parameters``) and checked the parameters
then; but in async mode ``state_dict()`` writes the values of its own moment into them
(values and optimizer state of one moment), and a push landing between the pull and
``get_state`` is in those values. A push whose update overflows (the shard checks a gradient
for being finite, not the value it makes) was then saved unchecked: the newest checkpoint
held infinities, and a resume trained on from them. Now the checkpoint has no
pull before its ``get_state`` (``checkpoint_state``); the push lands right before the
``get_state``, and the check must still come after it. Real shard, two ``PServerSync`` workers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.checkpoint import load_checkpoint
from distconv.resume import Position, StepCheckpoints, TrainingError
from distconv.run_dir import RunDirectory
from distconv.sync.base import SyncError


@contextmanager
def _chief_with_a_push_after_its_pull(
    shards, tmp_path, lr_scale: float
) -> Iterator[tuple[StepCheckpoints, list, list]]:
    """The chief's checkpoints of an async job of two workers (SGD, float32 values, a shard
    writing parts), whose rank 1 pushes one step (its learning rate times ``lr_scale``) in each
    checkpoint of the chief's, right before its ``get_state``; and the errors those pushes
    raised (a reply with values not finite is refused: rank 1 keeps its values)."""
    parts = tmp_path / "parts"
    (endpoint,) = shards.start(1, workers=2, mode="async", extra=["--checkpoint-dir", str(parts)])
    nets = [small_net(seed=r, dtype=np.float32) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2) for r in range(2)]
    run = RunDirectory(tmp_path / "run")
    ckpts = StepCheckpoints(run, nets[0].parameters(), syncs[0], {"seed": 0})
    refused: list[SyncError] = []
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        train_steps(nets[1], syncs[1], batches(1, 8, seed=1), 1, 2)  # the chief's pull moves
        syncs[1].set_lr_scale(lr_scale)
        gather = syncs[0]._gather_state

        def a_push_then_get_state(with_values: bool, **checked) -> dict:
            try:
                train_steps(nets[1], syncs[1], batches(1, 8, seed=2), 1, 2)
            except SyncError as error:  # the shard applied it: its values are the chief's
                refused.append(error)
            return gather(with_values, **checked)

        # the checkpoint's one get_state (no pull before it) comes after the push
        syncs[0]._gather_state = a_push_then_get_state
        syncs[0].barrier = lambda: None  # rank 1 is not in a checkpoint: nobody to wait for
        ckpts.open(False)
        yield ckpts, syncs, refused
    finally:
        ckpts.close()
        for s in syncs:
            s.close()


@pytest.mark.timeout(90)
def test_a_push_that_overflows_after_the_pull_is_not_checkpointed(shards, tmp_path):
    with _chief_with_a_push_after_its_pull(shards, tmp_path, 1e300) as (ckpts, _, refused):
        with pytest.raises(
            TrainingError, match=r"holds NaN or infinity at step 1 \(epoch 1\)"
        ) as e:
            ckpts.save(Position(0, 1, 1), {})
        assert str(e.value).endswith(
            "no checkpoint was written over the last finite one; lower the learning rate, train "
            "in a wider dtype, or check the data"
        ), e.value
        assert ckpts.run.manifests() == []
        assert not (ckpts.run.checkpoint_root / "step-00000001").exists()
        (pushed,) = refused  # rank 1 was told at once, by parameter, not at a checkpoint
        assert "rank 1: non-finite values (NaN or inf) for parameter" in str(pushed), pushed
    assert not list((tmp_path / "parts").glob("*")), "the shard wrote its part of step 1"


@pytest.mark.timeout(90)
def test_a_finite_push_after_the_pull_is_in_the_checkpoint(shards, tmp_path):
    with _chief_with_a_push_after_its_pull(shards, tmp_path, 1.0) as (ckpts, syncs, refused):
        ckpts.save(Position(0, 1, 1), {})
        (manifest,) = ckpts.run.manifests()
        saved = load_checkpoint(manifest.part("chief"))
        assert set(manifest.remote) == {"pserver-shard0"}
        assert refused == []
        syncs[1].refresh_parameters()  # the shard's values now: both of rank 1's pushes in
        now = {p.name: p.value for p in syncs[1].params}
    for name, value in now.items():
        assert np.isfinite(value).all(), name
        np.testing.assert_array_equal(saved.params[name], value, name)


@pytest.mark.timeout(90)
def test_an_async_state_dict_refuses_values_not_finite(shards, tmp_path):
    """``state_dict()`` outside a checkpoint writes the values of its moment into the
    parameters as a pull does, and refuses a NaN or inf as a pull does: it wrote them unchecked,
    with no checkpoint's check after it."""
    with _chief_with_a_push_after_its_pull(shards, tmp_path, 1e300) as (_, syncs, refused):
        before = {p.name: p.value.copy() for p in syncs[0].params}
        with pytest.raises(SyncError, match=r"rank 0: non-finite values \(NaN or inf\)"):
            syncs[0].state_dict()
        after = {p.name: p.value for p in syncs[0].params}
        assert len(refused) == 1, refused
    for name, value in after.items():
        np.testing.assert_array_equal(value, before[name], name)
