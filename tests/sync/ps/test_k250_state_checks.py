"""What rank 0 restores onto the shards (``PServerSync.load_state_dict``) is checked as a local
optimizer checks it: a moment of another shape, or of a parameter the setup does not have, is
refused naming it (a transposed moment went to the shards cut into other rows, without a
word), and one of another dtype is taken in the shards' dtype, as ``LocalSync`` copies it."""

from __future__ import annotations

import re

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync
from distconv.sync.ps.client import PServerSync


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


@pytest.mark.timeout(120)
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


@pytest.mark.timeout(120)
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
