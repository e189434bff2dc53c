"""save_checkpoint refuses a step that is no count, of the state or of the run, as a restore
refuses it: a run keeps its previous checkpoint rather than write one it cannot resume from."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import (
    CheckpointError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from distconv.parameter import Parameter

pytestmark = pytest.mark.timeout(30)


#: the forms of a whole number a count is saved from
WHOLE = [7, np.int64(7), np.array(7), 7.0, np.int64(2**63 - 1)]
WHOLE_IDS = ["int", "int64", "0-d array", "float 7.0", "int64 max"]


def _params() -> list[Parameter]:
    return [Parameter("w", np.ones(3, np.float32))]


def _adam(step: object) -> dict[str, dict[str, object]]:
    return {"w": {"m": np.zeros(3, np.float32), "v": np.zeros(3, np.float32), "step": step}}


@pytest.mark.parametrize(
    "step", [np.int64(-1), np.array(-3, np.int32)], ids=["int64 -1", "0-d int32 -3"]
)
def test_a_state_step_that_is_no_count_is_refused_and_nothing_is_written(tmp_path, step):
    path = tmp_path / "c.safetensors"
    with pytest.raises(CheckpointError, match=r"optimizer state w/step: holds -\d, not a count"):
        save_checkpoint(path, _params(), _adam(step))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("step", [-1, 2.5, float("nan"), 2**63], ids=str)
def test_a_run_step_that_is_no_count_is_refused_and_the_old_file_kept(tmp_path, step):
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, _params(), _adam(np.int64(4)), step=4)
    before = path.read_bytes()
    with pytest.raises(CheckpointError, match=r"step .*not a count"):
        save_checkpoint(path, _params(), _adam(np.int64(5)), step=step)
    assert path.read_bytes() == before


@pytest.mark.parametrize("step", WHOLE, ids=WHOLE_IDS)
def test_a_whole_step_is_saved(tmp_path, step):
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, _params(), _adam(np.int64(step)), step=step)
    ckpt = load_checkpoint(path)
    assert ckpt.step == int(step)
    assert ckpt.optim_state["w"]["step"] == int(step)


@pytest.mark.parametrize("epoch", [-1, 2.5, float("nan"), 2**63], ids=str)
def test_an_epoch_that_is_no_count_is_refused_and_the_old_file_kept(tmp_path, epoch):
    """The epoch was saved as ``int(epoch)``: -1 as -1, 2.5 as 2, NaN a bare ValueError."""
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, _params(), _adam(np.int64(4)), step=4, epoch=1)
    before = path.read_bytes()
    with pytest.raises(CheckpointError, match=r"cannot save checkpoint .*: epoch .*not a count"):
        save_checkpoint(path, _params(), _adam(np.int64(5)), step=5, epoch=epoch)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize("epoch", WHOLE, ids=WHOLE_IDS)
def test_a_whole_epoch_is_saved(tmp_path, epoch):
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, _params(), _adam(np.int64(1)), step=1, epoch=epoch)
    assert load_checkpoint(path).epoch == int(epoch)


@pytest.mark.parametrize("name", ["step", "epoch"])
@pytest.mark.parametrize(
    "value, said",
    [([1, 2], r"shape \(2,\)"), (np.array([5]), r"shape \(1,\)"), (True, "a bool")],
    ids=["list", "1-d array", "bool"],
)
def test_a_run_count_that_is_not_one_number_is_refused(tmp_path, name, value, said):
    """An array of counts passed the count check and int() raised a bare TypeError; a bool
    was saved as 1."""
    path = tmp_path / "c.safetensors"
    with pytest.raises(CheckpointError, match=rf"{name} .*: {said} given, not a count"):
        save_checkpoint(path, _params(), _adam(np.int64(1)), **{name: value})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "key, counts, said",
    [
        ("step_per_row", np.array([3, -1, 3]), "holds -1"),
        ("step_runs_per_row", np.array([[0, 3], [2, -1]]), "holds -1"),
        ("step_per_row", np.array([3.0, 2.5, 3.0]), "holds 2.5"),
    ],
    ids=["per row", "runs", "per row 2.5"],
)
def test_per_row_counts_that_are_no_count_are_refused(tmp_path, key, counts, said):
    """A parameter server's checkpoint holds its counts per row too (Adam's ``step`` of each
    block): one of -1 was written, and refused only at the resume (row_counts.count_problems)."""
    path = tmp_path / "c.safetensors"
    with pytest.raises(CheckpointError, match=rf"optimizer state w/{key}: {said}, not a count"):
        save_checkpoint(path, _params(), {"w": {**_adam(np.int64(3))["w"], key: counts}})
    assert list(tmp_path.iterdir()) == []


def test_per_row_counts_are_saved(tmp_path):
    path = tmp_path / "c.safetensors"
    rows = {"step_per_row": np.array([3, 0, 3]), "step_runs_per_row": np.array([[0, 3], [1, 0]])}
    save_checkpoint(path, _params(), {"w": {**_adam(np.int64(3))["w"], **rows}})
    saved = load_checkpoint(path).optim_state["w"]
    assert all(np.array_equal(saved[k], v) for k, v in rows.items())


def test_a_float_buffer_named_per_row_is_no_count_and_is_saved_and_restored(tmp_path):
    """An optimizer's own buffer may end in ``_per_row`` (an Adafactor-like ``v_per_row``):
    LocalSync and a restore take it as any float buffer, but the save took every such key
    for a parameter server's per-row counts and refused its fractions as "not a count"."""
    path = tmp_path / "c.safetensors"
    state = {"w": {**_adam(np.int64(3))["w"], "v_per_row": np.array([0.5, 0.25, 1.0])}}
    save_checkpoint(path, _params(), state, step=3)
    fresh = {"w": {k: np.zeros_like(v) for k, v in state["w"].items()}}
    restore_checkpoint(path, _params(), fresh)
    assert np.array_equal(fresh["w"]["v_per_row"], state["w"]["v_per_row"])


def test_the_count_check_copies_no_buffer_to_the_host(tmp_path, monkeypatch):
    """Whether a state value is a count is told from its shape and dtype: each buffer went to
    ``to_host`` for it, on a GPU run a copy of every moment (the model's size) beside the one
    the save makes. Only the counts themselves (0-d) are read."""
    import distconv.checkpoint_checks as checks

    shapes = []
    real = checks.to_host
    monkeypatch.setattr(checks, "to_host", lambda a: shapes.append(np.shape(a)) or real(a))
    save_checkpoint(tmp_path / "c.safetensors", _params(), _adam(np.int64(3)), step=3)
    assert shapes and all(shape == () for shape in shapes), shapes
