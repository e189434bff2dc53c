"""DotMulOperator's scale that float() cannot hold."""

import numpy as np
import pytest

from distconv import Arg
from distconv.layers import DotMulOperator, LayerError, Mixed


@pytest.mark.parametrize("scale", [10**400, -(10**400)])
def test_a_scale_too_large_for_a_float_is_refused_naming_the_operator(scale):
    # float() raised a bare OverflowError ("int too large to convert to float")
    with pytest.raises(LayerError, match=r"DotMulOperator: scale must be a number, got"):
        DotMulOperator(scale)


def test_a_large_int_scale_a_float_holds_still_works():
    layer = Mixed([None, None], [DotMulOperator(10**20)], size=2)
    out = layer(Arg(np.ones((1, 2))), Arg(np.full((1, 2), 2.0))).value
    np.testing.assert_array_equal(out, [[2e20, 2e20]])
