"""A convolution part's input_size given as numpy's int."""

import numpy as np
import pytest

from distconv import Arg
from distconv.layers import (
    ConvOperator,
    ConvProjection,
    ConvTransposeProjection,
    LayerError,
    Mixed,
)

F64 = np.float64


@pytest.mark.parametrize("cls", [ConvProjection, ConvTransposeProjection])
def test_a_numpy_int_input_size_is_a_square_image_as_an_int_is(rng, cls):
    # len(np.int64(5)) failed: "object of type 'numpy.int64' has no len()", a bare TypeError
    side = np.int64(5)
    proj = cls(2, 3, 3, padding=1, input_size=side, dtype=F64)
    same = cls(2, 3, 3, padding=1, input_size=5, dtype=F64)
    assert proj.input_size == same.input_size == (5, 5)
    layer, reference = Mixed([proj], dtype=F64), Mixed([same], dtype=F64)
    same.weight.value[...] = proj.weight.value
    x = rng.standard_normal((2, 50))
    np.testing.assert_array_equal(layer(Arg(x)).value, reference(Arg(x)).value)


def test_a_numpy_int_input_size_of_a_conv_operator():
    op = ConvOperator(1, 2, 3, input_size=np.int32(4))
    assert op.input_size == (4, 4) and op.out_width == 2 * 2 * 2


def test_a_float_input_size_is_refused_naming_the_part():
    with pytest.raises(LayerError, match=r"ConvProjection: input_size must be an int or 2 ints"):
        ConvProjection(1, 2, 3, input_size=5.0)
