"""Optimizer state given to save_checkpoint and restore_checkpoint, checked as the sync's
``load_state_dict`` checks it, before anything is written or copied.

Refused, naming the entry and the file: state whose entries are no mappings (``{"w": array}``)
or which is no mapping at all (was a bare AttributeError, ``'numpy.ndarray' object has no
attribute 'items'``); a value that is no numbers (``{"w": {"step": None}}``: was safetensors'
bare 'Unknown dtype "object"' at a save, an AttributeError at a restore); state whose
``name/key`` text a checkpoint has, but under another name or key (a parameter name that is no
string, 1 saved as "1"; a state key with a "/", "a/b" of "w" saved as optim/w/a/b and read back
as "b" of "w/a"), which passed the fit check by that text and then raised a bare KeyError after
every weight was copied.

And the checks refuse no state a distconv optimizer makes: every optimizer's state, trained so
that it is not zeros, dense and sparse, in float64, float32, float16 and bfloat16, goes through
a save and a restore bit for bit; a save of ``{}`` or ``None`` state saves none, while ``[]``
(no mapping) is refused naming it, as documented."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.checkpoint import (
    CheckpointError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from distconv.init import set_seed
from distconv.layers import FullyConnected, Mixed, SoftmaxCrossEntropy, TableProjection
from distconv.network import Network
from distconv.optim import OPTIMIZERS, create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(60)

VOCAB, WIDTH = 40, 3


def refused_save(tmp_path: Path, state: object) -> tuple[Path, str]:
    """A save of ``state`` over a checkpoint of step 1, refused: its path and the error. The
    checkpoint before it stays."""
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {"m": np.ones(2)}}, step=1)
    with pytest.raises(CheckpointError) as refused:
        save_checkpoint(path, [Parameter("w", np.zeros(2))], state, step=2)
    assert load_checkpoint(path).step == 1  # the one before it stays
    return path, str(refused.value)


def refused_restore(tmp_path: Path, state: object) -> tuple[Path, str]:
    """A restore of a checkpoint into ``state``, refused: its path and the error. Nothing was
    copied into the weight."""
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {"m": np.ones(2)}})
    w = Parameter("w", np.zeros(2))
    with pytest.raises(CheckpointError) as refused:
        restore_checkpoint(path, [w], state)
    np.testing.assert_array_equal(w.value, [0.0, 0.0])  # checked before anything is copied
    return path, str(refused.value)


NO_MAPPING_CASES = [
    ({"w": np.zeros(2)}, "optimizer state for 'w' is a ndarray, not a mapping of state keys"),
    ({"w": None}, "optimizer state for 'w' is a NoneType, not a mapping of state keys"),
    ([("w", {"m": np.zeros(2)})], "optimizer state is a list, not a mapping of parameter names"),
]


@pytest.mark.parametrize("state,said", NO_MAPPING_CASES)
def test_a_save_of_state_that_is_no_mapping_is_refused_naming_it(tmp_path, state, said):
    path, refused = refused_save(tmp_path, state)
    assert f"cannot save checkpoint {path}: {said}" in refused
    assert "(it has [])" not in refused  # no keys to tell of: none are said


def test_a_restore_names_the_state_keys_the_checkpoint_has_for_the_entry(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {"m": np.ones(2)}})
    with pytest.raises(CheckpointError, match=r"arrays \(it has \['m'\]\)$"):
        restore_checkpoint(path, [Parameter("w", np.zeros(2))], {"w": np.zeros(2)})


def test_well_formed_state_still_saves_and_restores(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {"m": np.full(2, 3.0)}})
    state = {"w": {"m": np.zeros(2)}}
    restore_checkpoint(path, [Parameter("w", np.zeros(2))], state)
    np.testing.assert_array_equal(state["w"]["m"], [3.0, 3.0])


def test_a_restore_into_state_with_a_key_that_is_no_string_is_refused_and_copies_nothing(
    tmp_path,
):
    """A save writes key 1 as ``optim/w/1``, read back as "1"; the fit check compared the two by
    their text, passed, and the copy then raised a bare ``KeyError: 1`` after the weights were
    already restored."""
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {1: np.ones(2)}})
    w, state = Parameter("w", np.zeros(2)), {"w": {1: np.zeros(2)}}
    with pytest.raises(CheckpointError) as refused:
        restore_checkpoint(path, [w], state)
    said = "optimizer state 'w' has no state 1 (state keys are strings: it has ['1'])"
    assert said in str(refused.value)
    np.testing.assert_array_equal(w.value, [0.0, 0.0])
    np.testing.assert_array_equal(state["w"][1], [0.0, 0.0])


VALUE_CASES = [
    ({"w": {"step": None}}, "optimizer state w/step: a NoneType given, not an array of numbers"),
    ({"w": {"m": "ab"}}, "optimizer state w/m: a str given, not an array of numbers"),
]


@pytest.mark.parametrize("state,said", VALUE_CASES)
def test_a_save_of_a_value_that_is_no_numbers_is_refused_naming_it(tmp_path, state, said):
    path, refused = refused_save(tmp_path, state)
    assert f"cannot save checkpoint {path}: {said}" == refused


@pytest.mark.parametrize("state,said", NO_MAPPING_CASES + VALUE_CASES)
def test_a_restore_into_state_that_is_no_mapping_or_no_numbers_is_refused_and_copies_nothing(
    tmp_path, state, said
):
    path, refused = refused_restore(tmp_path, state)
    assert f"checkpoint {path} does not fit the model: {said}" in refused


def test_numbers_that_are_no_array_still_save(tmp_path):
    """A list or a Python number is numbers (the sync takes them too): saved as before."""
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {"m": [1.0, 2.0], "step": 3}})
    state = load_checkpoint(path).optim_state["w"]
    assert state["m"].tolist() == [1.0, 2.0] and int(state["step"]) == 3


READ_BACK_CASES = [
    ({1: {"m": np.ones(2)}}, "optimizer state 1/'m' is read back from a checkpoint as '1'/'m'"),
    (
        {"w": {"a/b": np.ones(2)}},
        "optimizer state 'w'/'a/b' is read back from a checkpoint as 'w/a'/'b'",
    ),
]


@pytest.mark.parametrize("state,said", READ_BACK_CASES)
def test_state_the_checkpoint_reads_back_otherwise_is_refused_and_copies_nothing(
    tmp_path, state, said
):
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], state)
    w = Parameter("w", np.zeros(2))
    ours = {name: {key: np.zeros(2) for key in s} for name, s in state.items()}
    with pytest.raises(CheckpointError) as refused:
        restore_checkpoint(path, [w], ours)
    assert f"checkpoint {path} does not fit the model: {said}" in str(refused.value)
    np.testing.assert_array_equal(w.value, [0.0, 0.0])  # checked before anything is copied
    assert all(not v.any() for s in ours.values() for v in s.values())


def test_a_parameter_name_with_a_slash_still_restores(tmp_path):
    """The split is at the last "/": a parameter's name may hold one (keys may not)."""
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("a/b", np.ones(2))], {"a/b": {"m": np.full(2, 3.0)}})
    w, state = Parameter("a/b", np.zeros(2)), {"a/b": {"m": np.zeros(2)}}
    restore_checkpoint(path, [w], state)
    np.testing.assert_array_equal(state["a/b"]["m"], [3.0, 3.0])


def _net(dtype) -> Network:
    """A sparse table under a classifier: sparse rows and dense weights, in ``dtype``."""
    set_seed(1)
    net = Network()
    net.add("embed", Mixed([TableProjection(VOCAB, WIDTH, sparse=True)]), inputs="words")
    net.add("logits", FullyConnected(WIDTH, 3), inputs="embed")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["logits", "label"])
    for p in net.parameters():
        p.cast(dtype)
    return net


def _trained(name: str, dtype) -> tuple[Network, LocalSync]:
    """Three steps of ``name``: its state holds numbers that are not zeros."""
    net = _net(dtype)
    eps = {"eps": 1e-3} if "eps" in create_optimizer(name).hyper else {}  # 1e-8 is 0 in float16
    sync = LocalSync(create_optimizer(name, lr=0.1, **eps))
    sync.setup(net.parameters(), {})
    rng = np.random.default_rng(2)
    for _ in range(3):
        words = rng.integers(0, VOCAB, 6)
        sync.start_step(len(words))
        feed = {"words": Arg(ids=words, needs_grad=False), "label": Arg(ids=words % 3)}
        net.forward(feed)
        net.backward(sync, loss="loss", loss_scale=len(words))
        sync.finish_step()
    return net, sync


def _bits(a) -> tuple:
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


DTYPES = [np.float64, np.float32, np.float16]
try:
    import ml_dtypes

    DTYPES.append(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency of the tests
    pass


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizers_state_saves_and_restores_bitwise(tmp_path, name, dtype):
    net, sync = _trained(name, dtype)
    state = sync.state_dict()
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, net.parameters(), state, step=3)
    loaded = load_checkpoint(path).optim_state
    saved = {n: sorted(s) for n, s in state.items() if s}  # SGD's empty entries leave no tensor
    assert {n: sorted(s) for n, s in loaded.items()} == saved
    for n, s in state.items():
        for key, value in s.items():
            assert _bits(loaded[n][key]) == _bits(value), (n, key)
    fresh_net, fresh = _net(dtype), LocalSync(sync.optimizer)
    fresh.setup(fresh_net.parameters(), {})  # zeros, as a resumed run's before its restore
    restore_checkpoint(path, fresh_net.parameters(), fresh.state)
    for n, s in state.items():
        for key, value in s.items():
            assert _bits(fresh.state[n][key]) == _bits(value), (n, key)
    for p, q in zip(net.parameters(), fresh_net.parameters()):
        assert _bits(q.value) == _bits(p.value), p.name


@pytest.mark.parametrize("state", [{}, None])
def test_a_save_of_no_state_saves_none(tmp_path, state):
    net, _ = _trained("adam", np.float64)
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, net.parameters(), state)
    assert load_checkpoint(path).optim_state == {}


def test_a_save_of_an_empty_list_is_refused_as_no_mapping(tmp_path):
    """The docstring: 'the optimizer state or an entry of it is no mapping' is refused
    (``optim_state or {}`` once took ``[]`` as no state)."""
    net, _ = _trained("sgd", np.float64)
    path = tmp_path / "ckpt.safetensors"
    with pytest.raises(CheckpointError, match=r"optimizer state is a list, not a mapping"):
        save_checkpoint(path, net.parameters(), [])
    assert not path.exists()
