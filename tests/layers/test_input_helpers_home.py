"""The helpers a layer's code calls on its inputs live in :mod:`distconv.layers.inputs`; a layer
of one's own written against ``distconv.layers.base``, as the docs once said, gets the same
functions there."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg
from distconv.layers import base, inputs


@pytest.mark.parametrize("name", ["values_of", "grad_target", "add_grad"])
def test_base_gives_the_input_helpers_of_their_own_module(name):
    assert getattr(base, name) is getattr(inputs, name)


def test_add_grad_through_base_adds_into_the_input():
    x = Arg(np.zeros((2, 3), np.float32), needs_grad=True)
    base.add_grad(x, np.ones((2, 3), np.float32))
    base.add_grad(x, np.full((2, 3), 2.0, np.float32))
    np.testing.assert_array_equal(base.grad_target(x), np.full((2, 3), 3.0, np.float32))
