"""Whose a layer's error is where its failing line hands an array to code that cannot be read
(compiled code's, which may write into what it is given).

Run here as Python runs them, and again with no columns kept (``-X no_debug_ranges``, as
Python 3.10) by ``test_reading_lines_without_columns.py``: each asserts one diagnosis for both.
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.network import NetworkError
from tests.layer_mistakes import ScaleShift, build, trained_as


class ShufflesItsFiredWeight(ScaleShift):
    """A ScaleShift that fires its weight, then hands the weight's gradient, through a variable,
    to compiled code that writes into it (numpy's Cython shuffle, standing in for a kernel of
    one's own): no line says which array the kernel writes."""

    def _backward(self, dz, callback):
        super()._backward(dz, callback)
        g = self.weight.grad
        np.random.default_rng(0).shuffle(g)


def test_a_fired_gradient_handed_to_compiled_code_that_writes_it_is_named():
    """The line is read and names no ``.grad``: the guard said nothing, and numpy's "array is
    read-only" came out alone, though the guard itself had made the fired gradient so."""
    with pytest.raises(NetworkError) as caught:
        trained_as(ShufflesItsFiredWeight, "alias", build())
    said = str(caught.value)
    assert "layer 'ss1' wrote into the gradient of 'ss1.weight' after firing it" in said, said
