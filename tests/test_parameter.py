"""Parameter's own checks of what it is built from."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Parameter
from distconv.layers import FullyConnected


@pytest.mark.parametrize("value", [[[0.5] * 4] * 3, 0.5])
def test_a_parameter_of_a_list_or_a_python_number_is_refused_naming_it(value):
    """Parameter("tied", [[...]]) was taken: its repr, the layer's shape check of a shared
    weight and the first update each failed with "'list' object has no attribute 'shape'"."""
    with pytest.raises(TypeError, match=r"parameter 'tied': the value must be an array"):
        FullyConnected(4, 3, weight=Parameter("tied", value))


@pytest.mark.parametrize("name", ["", 5, None])
def test_a_parameter_name_that_is_not_a_string_is_refused(name):
    """A number was taken as the name, which checkpoints and the wire key by string."""
    with pytest.raises(ValueError, match=r"a Parameter needs a non-empty name \(a str\)"):
        Parameter(name, np.zeros(3))


def test_a_numpy_scalar_is_a_0_d_parameter_and_a_shared_array_is_taken():
    assert Parameter("s", np.float32(2.0)).shape == ()
    tied = Parameter("tied", np.full((3, 4), 0.5, np.float32))
    assert FullyConnected(4, 3, weight=tied).weight is tied


def test_a_numpy_scalar_parameter_trains():
    """A numpy scalar was kept as the value: immutable, every update in place was lost and
    the parameter stayed at its first value, silently."""
    from distconv.optim import SGD
    from distconv.sync.local import LocalSync

    p = Parameter("s", np.float32(2.0))
    sync = LocalSync(SGD(lr=0.5))
    sync.setup([p])
    sync.start_step(1)
    p.grad[...] = 1.0
    p.inc_update(sync)
    sync.finish_step()
    assert p.value.dtype == np.float32 and float(p.value) == 1.5


def test_a_parameter_of_a_torch_tensor_is_refused_naming_it():
    """A torch tensor has a dtype and a shape, so it was taken, and the sync's setup failed
    with "Cannot interpret 'torch.float32' as a data type", naming no parameter."""
    torch = pytest.importorskip("torch")
    said = r"parameter 'tied': the value must be an array, got Tensor \(numpy or cupy; a torch "
    with pytest.raises(TypeError, match=said):
        Parameter("tied", torch.zeros(3, 4))
