"""A projection or operator of one's own in a Mixed layer: numpy's errors in it name the part."""

import numpy as np
import pytest

from distconv import Arg
from distconv.layers.mixed import Mixed
from distconv.layers.operator import Operator
from distconv.layers.part import Projection, WeightSpec
from distconv.sync.ps.wire import WireError


class RowShort(Projection):
    """``out += x * w``, reading one row too few in the pass named ``broken``."""

    def __init__(self, width: int, broken: str) -> None:
        super().__init__(width, width, WeightSpec((width,), dtype=np.float64))
        self.broken = broken

    def forward(self, input, out):
        x = input.value[:-1] if self.broken == "forward" else input.value
        out += x * self.weight.value

    def _backward(self, input, dout):
        input.grad += (dout[:-1] if self.broken == "backward" else dout) * self.weight.value
        self.weight.grad += (dout * input.value).sum(0)


class SumShort(Operator):
    """``out += a + b``, reading one row too few in the pass named ``broken``."""

    def __init__(self, broken: str) -> None:
        super().__init__([0, 1], None)
        self.broken = broken

    def forward(self, inputs, out):
        a, b = inputs[0].value, inputs[1].value
        out += (a + b)[:-1] if self.broken == "forward" else a + b

    def backward(self, inputs, dout):
        for arg in inputs:
            arg.grad += dout[:-1] if self.broken == "backward" else dout


def _mixed(part: str, broken: str) -> tuple[Mixed, list[Arg]]:
    """A Mixed layer with one part of one's own, broken in ``broken``, and its inputs."""
    x = np.random.default_rng(0).standard_normal((4, 3))
    if part == "projection":
        return Mixed([RowShort(3, broken)], name="mix"), [Arg(x, needs_grad=True)]
    layer = Mixed([None, None], [SumShort(broken)], size=3, name="mix")
    return layer, [Arg(x, needs_grad=True), Arg(x.copy(), needs_grad=True)]


@pytest.mark.parametrize(
    ("part", "label"), [("projection", "RowShort 'proj0'"), ("operator", "SumShort 'op0'")]
)
@pytest.mark.parametrize("broken", ["forward", "backward"])
def test_a_numpy_error_in_a_part_of_one_s_own_names_the_part(part, label, broken):
    """numpy's "operands could not be broadcast together" in a projection or operator of
    one's own was told as "Mixed 'mix': operands could not ...": which of the layer's parts
    (a Mixed has several) was left to guess. The part is named, numpy's error chained."""
    layer, inputs = _mixed(part, broken)
    prefix = f"Mixed 'mix': {label}: " + ("backward: " if broken == "backward" else "")
    with pytest.raises(ValueError, match=f"^{prefix}.*(broadcast|could not)") as e:
        layer.forward(*inputs)
        layer.output.grad = np.ones((4, 3))
        layer.backward(lambda p: None)
    assert isinstance(e.value.__cause__, ValueError), "numpy's error is chained"


def test_a_callback_s_error_through_a_projection_passes_as_it_is():
    """The callback runs below Projection.backward too (the weight's inc_update): a sync's own
    ValueError is its own, not relabelled as the projection's."""
    layer, inputs = _mixed("projection", "neither")
    layer.forward(*inputs)
    layer.output.grad = np.ones((4, 3))
    error = WireError("the server refused the push")

    def callback(p):
        raise error

    with pytest.raises(WireError) as e:
        layer.backward(callback)
    assert e.value is error
