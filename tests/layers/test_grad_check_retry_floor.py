"""The gradient check's retry at a smaller step judges small derivatives against a floor ten
times higher (its rounding is ten times larger): that floor is for a kink, whose central
difference the smaller step moves. At a smooth point under a float32 output of 1 or 10 the
first comparison's excess is within what rounding may move the retry's difference by, so the
retry was taken, and a wrong derivative the first step failed passed against that floor."""

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from tests.layers.test_grad_check_curve_retry import Bowl

#: (output offset, input's distance above the bowl's bottom, backward's factor)
WRONG = [(1.0, 1e-3, 1.05), (10.0, 3e-4, 0.5), (10.0, 1e-2, 1.05)]


class RaisedBowl(Bowl):
    """``y = 50 (x - 0.3)^2 + offset``: the bowl over a float32 output of about ``offset``."""

    def __init__(self, factor: float, offset: float) -> None:
        super().__init__(factor)
        self.offset = offset

    def _forward(self, x):
        return (super()._forward(x) + np.float32(self.offset)).astype(x.value.dtype)


def _at(distance: float) -> list[Arg]:
    return [Arg(np.array([0.3 + distance], np.float32), needs_grad=True)]


@pytest.mark.parametrize("offset, distance, factor", WRONG)
def test_a_wrong_gradient_at_a_smooth_point_fails_in_float32(offset, distance, factor):
    with pytest.raises(AssertionError, match=r"RaisedBowl: gradient of input 0.* is off"):
        check_layer_grad(RaisedBowl(factor, offset), _at(distance), elements=1)


@pytest.mark.parametrize("offset, distance", sorted({(o, d) for o, d, _ in WRONG}))
def test_the_right_gradient_there_passes(offset, distance):
    assert check_layer_grad(RaisedBowl(1.0, offset), _at(distance), elements=1).worst <= 2e-2
