"""Checkpoints: round trip, the file format, and a model that does not match."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import distconv.checkpoint as checkpoint_module
from distconv.checkpoint import (
    CheckpointError,
    CheckpointReadError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from distconv.layers import FullyConnected
from distconv.network import Network
from distconv.parameter import Parameter
from tests.checkpoint_model import adam_state, save_small, small_model


def test_round_trip_restores_values_state_and_metadata(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    params = small_model(0)
    _, state = adam_state(params)
    save_small(path, params, state, extra={"batch_size": 32})

    fresh = small_model(1)
    _, fresh_state = adam_state(fresh, steps=0)
    ids = [id(p.value) for p in fresh]
    ckpt = restore_checkpoint(path, fresh, fresh_state)

    for a, b in zip(params, fresh):
        np.testing.assert_array_equal(a.value, b.value)
    assert [id(p.value) for p in fresh] == ids  # copied in place: views elsewhere stay valid
    for name in state:
        for key in state[name]:
            np.testing.assert_array_equal(fresh_state[name][key], state[name][key])
    assert fresh_state["conv1.bias"]["step"].shape == ()
    assert int(fresh_state["conv1.bias"]["step"]) == 2
    assert (ckpt.step, ckpt.epoch, ckpt.seed) == (7, 2, 42)
    assert ckpt.optimizer == {"name": "adam", "lr": 0.1}
    assert ckpt.extra == {"batch_size": 32}


@pytest.mark.parametrize(
    "dtype",
    [
        "bfloat16",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
    ],
)
def test_ml_dtypes_parameters_come_back_bitwise(tmp_path, dtype):
    """safetensors writes BF16 and F8_E4M3 ... but its numpy loader cannot read them: nothing
    saved is lost (a float8 resume called the checkpoint 'truncated or corrupt')."""
    dtype = getattr(pytest.importorskip("ml_dtypes"), dtype)
    path = tmp_path / "checkpoint.safetensors"
    rng = np.random.default_rng(3)
    params = [
        Parameter("w", np.abs(rng.standard_normal((5, 3))).astype(dtype)),
        Parameter("b", rng.standard_normal(3).astype(np.float32)),
    ]
    save_small(path, params, {})
    fresh = [Parameter(p.name, np.zeros_like(p.value)) for p in params]
    restore_checkpoint(path, fresh)
    for a, b in zip(params, fresh):
        assert b.value.dtype == a.value.dtype
        assert a.value.tobytes() == b.value.tobytes()
    assert load_checkpoint(path).params["w"].dtype == dtype


def test_file_is_plain_safetensors_with_prefixed_optimizer_state(tmp_path):
    from safetensors.numpy import load_file

    path = tmp_path / "c.safetensors"
    params = small_model()
    _, state = adam_state(params)
    save_small(path, params, state)
    tensors = load_file(path)
    assert "optim/conv1.weight/m" in tensors and "optim/fc/1.weight/step" in tensors
    np.testing.assert_array_equal(tensors["conv1.bias"], params[1].value)
    umask = os.umask(0o022)
    os.umask(umask)
    assert oct(path.stat().st_mode & 0o777) == oct(0o644 & ~umask)  # not private: mkstemp's


def test_metadata_is_json(tmp_path):
    from safetensors import safe_open

    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None)
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    assert json.loads(meta["optimizer"]) == {"name": "adam", "lr": 0.1}
    assert meta["format"] == checkpoint_module.FORMAT and meta["step"] == "7"


def test_name_clash_with_the_optimizer_prefix(tmp_path):
    with pytest.raises(CheckpointError, match="cannot save parameter 'optim/x'"):
        save_checkpoint(tmp_path / "c.safetensors", [Parameter("optim/x", np.zeros(1))])


def test_arrays_in_place_of_parameters_are_refused_naming_the_argument(tmp_path):
    """Arrays have no name to save them by: the refusal said "'numpy.ndarray' object has no
    attribute 'name'", naming neither ``params`` nor where Parameters come from."""
    path = tmp_path / "c.safetensors"
    with pytest.raises(TypeError) as info:
        save_checkpoint(path, [np.zeros(3)])
    assert str(info.value) == "params must be Parameters (net.parameters()), got ndarray"
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("given", ["network", "dict", "method", "parameter"])
def test_a_network_or_a_dict_in_place_of_parameters_is_refused_naming_it(tmp_path, given):
    """The network itself failed as "KeyError: 0" (its ``__getitem__`` takes names), a dict
    of parameters as "got str" (its keys), ``net.parameters`` uncalled as "'method' object is
    not iterable", one Parameter as "got Parameter"; each now says what it got and what to
    pass, to the save and to the restore alike."""
    net = Network()
    net.add("fc", FullyConnected(3, 2), "x")
    by_name = {p.name: p for p in net.parameters()}
    params = {"network": net, "dict": by_name, "method": net.parameters}
    params["parameter"] = net.parameters()[0]
    said = {"network": "Network", "dict": "dict", "method": "method", "parameter": "Parameter"}
    words = f"params must be a sequence of Parameters (net.parameters()), got {said[given]}"
    with pytest.raises(TypeError) as info:
        save_checkpoint(tmp_path / "c.safetensors", params[given])
    assert str(info.value) == words
    assert list(tmp_path.iterdir()) == []  # nothing written
    save_checkpoint(tmp_path / "c.safetensors", net.parameters())
    with pytest.raises(TypeError) as info:
        restore_checkpoint(tmp_path / "c.safetensors", params[given])
    assert str(info.value) == words


def test_missing_file_names_it(tmp_path):
    with pytest.raises(CheckpointReadError, match=r"checkpoint .*nope.safetensors does not exist"):
        load_checkpoint(tmp_path / "nope.safetensors")


def test_mismatched_model_lists_every_problem_and_changes_nothing(tmp_path):
    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None)
    other = [
        Parameter("conv1.weight", np.zeros((8, 1, 3, 3), np.float32)),  # wrong shape
        Parameter("conv2.weight", np.zeros((2, 2), np.float32)),  # not in the checkpoint
        Parameter("conv1.bias", np.zeros(4, np.float32)),  # fits
    ]
    with pytest.raises(CheckpointError) as info:
        restore_checkpoint(path, other)
    msg = str(info.value)
    assert "does not fit the model" in msg
    assert "parameter 'conv2.weight' is missing from the checkpoint" in msg
    assert "parameter 'fc/1.weight' is in the checkpoint but not in the model" in msg
    assert "'conv1.weight': model shape (8, 1, 3, 3), checkpoint shape (4, 1, 3, 3)" in msg
    assert not other[2].value.any()  # checked everything before writing anything


def test_another_dtype_is_refused_like_another_shape_and_changes_nothing(tmp_path):
    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None)  # float32
    wider = small_model(1)
    wider[1].cast(np.float64)
    before = [p.value.copy() for p in wider]
    with pytest.raises(CheckpointError) as info:
        restore_checkpoint(path, wider)
    assert str(info.value) == (
        f"checkpoint {path} does not fit the model: parameter 'conv1.bias': model dtype "
        "float64, checkpoint dtype float32"
    )
    assert all(np.array_equal(b, p.value) for b, p in zip(before, wider))  # not cast in


def test_optimizer_state_mismatch_is_reported(tmp_path):
    path = tmp_path / "c.safetensors"
    params = small_model()
    save_small(path, params, None)  # saved without optimizer state
    _, state = adam_state(params, steps=0)
    with pytest.raises(CheckpointError, match="optimizer state 'conv1.bias/m' is missing"):
        restore_checkpoint(path, params, state)
