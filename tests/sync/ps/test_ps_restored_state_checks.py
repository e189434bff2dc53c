"""Optimizer state to restore, checked by ``LocalSync`` and ``PServerSync`` alike.

What rank 0 restores onto the shards (``PServerSync.load_state_dict``) is checked as a local
optimizer checks it: a moment of another shape, or of a parameter the setup does not have, is
refused naming it (a transposed moment went to the shards cut into other rows, without a
word), and one of another dtype is taken in the shards' dtype, as ``LocalSync`` copies it.

State whose entries are no mappings (``{"w": array}``, ``{"w": None}``, a state key that is no
string), or which is no mapping at all, is refused with the ``load_state_dict`` error that names
it, as a moment of another shape is: it was a bare AttributeError (``'numpy.ndarray' object has
no attribute 'items'``).

State whose value is no array of numbers (``{"w": {"step": None}}``) is refused alike, and
nothing is copied: a value of a scalar buffer (Adam's ``step``, shape ``()``) passed the shape
check, as ``np.shape(None)`` is ``()``; LocalSync then copied ``m`` and ``v`` before a bare
TypeError (``int() argument must be ... not 'NoneType'``) on ``step``, and PServerSync raised it
too."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync
from distconv.sync.ps.client import PServerSync

pytestmark = pytest.mark.timeout(120)


def _setup(sync, state):
    w = Parameter("w", np.ones((2, 3)))
    try:
        sync.setup([w], None, state)
        return sync.state_dict()["w"]
    finally:
        sync.close()


def _ps(shards, name="momentum"):
    return PServerSync(
        create_optimizer(name, lr=0.1),
        rank=0,
        world_size=1,
        pservers=shards.start(1, workers=1),
        insecure=True,
        timeout=20,
        block_bytes=16,  # two elements a block: three blocks of w
    )


@pytest.mark.parametrize(
    "state, why",
    [
        ({"w": {"velocity": np.arange(6.0).reshape(3, 2)}}, "w/velocity: shape (3, 2) given"),
        ({"w": {"velocity": np.arange(3.0)}}, "w/velocity: shape (3,) given, (2, 3) here"),
        ({"x": {"velocity": np.zeros(3)}}, "state for 'x', which is no parameter of its setup"),
    ],
)
def test_state_of_another_shape_or_parameter_is_refused_as_locally(shards, state, why):
    with pytest.raises(ValueError, match=re.escape("LocalSync.load_state_dict: " + why)):
        _setup(LocalSync(create_optimizer("momentum", lr=0.1)), state)
    with pytest.raises(ValueError, match=re.escape("PServerSync.load_state_dict: " + why)):
        _setup(_ps(shards), state)


def test_state_of_another_dtype_is_restored_in_the_shards_dtype(shards):
    m = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    state = {"w": {"m": m, "v": m * m, "step": np.array(7.0)}}  # step saved as a float
    local = _setup(LocalSync(create_optimizer("adam", lr=0.1)), state)
    remote = _setup(_ps(shards, "adam"), state)  # was: set_state refused float32 for float64
    for key in ("m", "v", "step"):
        assert remote[key].dtype == local[key].dtype, key
        np.testing.assert_array_equal(remote[key], local[key], err_msg=key)
    np.testing.assert_array_equal(remote["m"], m.astype(np.float64))
    assert int(remote["step"]) == 7


def _load(sync, state):
    w = Parameter("w", np.ones((2, 3)))
    try:
        sync.setup([w], None)
        before = {k: np.array(v) for k, v in sync.state_dict()["w"].items()}
        with pytest.raises(ValueError) as refused:
            sync.load_state_dict(state)
        after = sync.state_dict()["w"]
        for key, value in before.items():  # nothing copied
            np.testing.assert_array_equal(after[key], value, err_msg=key)
        return str(refused.value)
    finally:
        sync.close()


ENTRY_CASES = [
    ({"w": np.zeros((2, 3))}, "state for 'w' is a ndarray, not a mapping of state keys"),
    ({"w": None}, "state for 'w' is a NoneType, not a mapping of state keys"),
    (
        {"w": {0: np.zeros((2, 3))}},
        "'w' has no state 0 (state keys are strings: it has ['velocity'])",
    ),
    ([("w", {"velocity": np.zeros((2, 3))})], "state is a list, not a mapping of parameter"),
]


@pytest.mark.parametrize("state, why", ENTRY_CASES)
def test_an_entry_that_is_no_mapping_is_refused_with_its_name_locally(state, why):
    said = _load(LocalSync(create_optimizer("momentum", lr=0.1)), state)
    assert said.startswith("LocalSync.load_state_dict: ")
    assert why in said


@pytest.mark.parametrize("state, why", ENTRY_CASES)
def test_an_entry_that_is_no_mapping_is_refused_with_its_name_on_the_shards(shards, state, why):
    sync = insecure_worker(shards.start(1, workers=1), optimizer="momentum", lr=0.1)
    said = _load(sync, state)
    assert re.match(r"PServerSync\.load_state_dict: ", said)
    assert why in said


def _state(**given) -> dict:
    """Adam's state for the (2, 3) parameter ``w`` of ``_load``, with ``given`` in it."""
    return {"w": {"m": np.full((2, 3), 5.0), "v": np.full((2, 3), 7.0), "step": 3, **given}}


VALUE_CASES = [
    (_state(step=None), "w/step: a NoneType given, not an array of numbers"),
    (_state(step="x"), "w/step: a str given, not an array of numbers"),
    (_state(step={}), "w/step: a dict given, not an array of numbers"),
    (_state(m=np.full((2, 3), "x")), "w/m: a ndarray of <U1 given, not an array of numbers"),
    (_state(m=[[1.0, 2.0, 3.0], [4.0]]), "w/m: a list given, not an array of numbers"),
]


@pytest.mark.parametrize("state, why", VALUE_CASES)
def test_a_value_that_is_no_numbers_is_refused_with_its_name_locally(state, why):
    said = _load(LocalSync(create_optimizer("adam", lr=0.1)), state)
    assert said.startswith("LocalSync.load_state_dict: ") and why in said, said


@pytest.mark.parametrize("state, why", VALUE_CASES)
def test_a_value_that_is_no_numbers_is_refused_with_its_name_on_the_shards(shards, state, why):
    sync = insecure_worker(shards.start(1, workers=1), optimizer="adam", lr=0.1)
    said = _load(sync, state)
    assert said.startswith("PServerSync.load_state_dict: ") and why in said, said


@pytest.mark.parametrize("sync", ["local", "pserver"])
def test_numbers_in_any_form_are_still_taken(shards, sync):
    """A guard: lists, Python scalars, integer and bool arrays are numbers copy_into takes."""
    if sync == "local":
        s = LocalSync(create_optimizer("adam", lr=0.1))
    else:
        s = insecure_worker(shards.start(1, workers=1), optimizer="adam", lr=0.1)
    try:
        s.setup([Parameter("w", np.ones((2, 3)))])
        given = {"m": [[1, 2, 3], [4, 5, 6]], "v": np.ones((2, 3), bool), "step": np.int32(4)}
        s.load_state_dict({"w": given})
        got = s.state_dict()["w"]
        np.testing.assert_array_equal(got["m"], [[1, 2, 3], [4, 5, 6]])
        np.testing.assert_array_equal(got["v"], np.ones((2, 3)))
        assert int(got["step"]) == 4
    finally:
        s.close()
