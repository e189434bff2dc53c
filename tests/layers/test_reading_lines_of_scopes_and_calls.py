"""Whose a layer's error is where its failing line hands an array to code that cannot be read
(compiled code's, which may write into what it is given), where the failing instruction is
a comprehension's or a lambda's, a scope of its own inside the line's statement, or a call
given ``out=`` inside a longer expression.

Run here as Python runs them, and again with no columns kept (``-X no_debug_ranges``, as
Python 3.10) by ``test_reading_lines_without_columns.py``: each asserts one diagnosis for both.
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.layers.base import Layer, LayerError, LayerTypeError
from distconv.network import Network, NetworkError
from tests.layer_mistakes import ScaleShift, build, trained_as
from tests.layers.blame_checks import frozen_bias_run_forward
from tests.layers.researcher_layers import Scale


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


class AddsThroughAProperty(ScaleShift):
    """A ScaleShift whose weight fires before its share is in, the share added through a
    property of its own that returns the weight's gradient: the line writes, and what it writes
    into the guard cannot read without running the property."""

    @property
    def weight_share(self):
        return self.weight.grad

    def _backward(self, dz, callback):
        (x,) = self.inputs
        self.bias.grad += dz.sum(axis=0)
        self.bias.inc_update(callback)
        self.weight.inc_update(callback)
        self.weight_share[...] += (dz * x.value).sum(axis=0)


def test_a_late_write_into_a_property_s_array_blames_every_fired_gradient():
    """A line read whose written array cannot be read (a property's), naming no ``.grad``: the
    guard said nothing, where the docs promise the write is named as one into the fired
    gradients."""
    with pytest.raises(NetworkError) as caught:
        trained_as(AddsThroughAProperty, "property", build())
    said = str(caught.value)
    assert "layer 'ss1' wrote into the gradient of 'ss1.bias' or 'ss1.weight'" in said, said


class NegatesIntoItsOwnBesideAFiredGradient(ScaleShift):
    """A correct ScaleShift that, after firing, writes into a read-only array of its own by a
    ufunc's output given by position, inside an expression that also reads a fired gradient
    (allowed)."""

    def _backward(self, dz, callback):
        super()._backward(dz, callback)
        scratch = np.broadcast_to(np.zeros(dz.shape[1]), dz.shape)  # read-only
        self.spent = np.negative(dz, scratch).sum() + self.bias.grad.sum()


def test_an_own_array_written_inside_an_expression_is_not_blamed_on_a_gradient_read_there():
    """Read as its whole statement, the call's written array inside the sum was not found, and
    the fired bias the line reads was named for the layer's write into its own array."""
    with pytest.raises(LayerError, match="read-only") as caught:
        trained_as(NegatesIntoItsOwnBesideAFiredGradient, "expression", build())
    assert not isinstance(caught.value, NetworkError), caught.value


class ScalesByItsCaches(Scale):
    """A Scale of a frozen bias whose input's gradient is scaled by caches of its own, one left
    None: the comprehension fails, on a line that touches no parameter's gradient."""

    caches = (None,)

    def _backward(self, dz, callback):
        x = self.inputs[0]
        x.grad = dz * sum([c * 2 for c in self.caches])


class ScalesByALambda(Scale):
    """As :class:`ScalesByItsCaches`, the cache read in a lambda defined on that line."""

    cache = None

    def _backward(self, dz, callback):
        x = self.inputs[0]
        x.grad = dz * (lambda: self.cache * 2)()


class ScalesByALambdaCalledLater(Scale):
    """As :class:`ScalesByALambda`, the lambda defined on a line before the one that calls it:
    its frame's statement is not its caller's."""

    cache = None

    def _backward(self, dz, callback):
        x = self.inputs[0]
        scale = lambda: self.cache * 2  # noqa: E731
        x.grad = dz * scale()


@pytest.mark.parametrize(
    "layer_class", [ScalesByItsCaches, ScalesByALambda, ScalesByALambdaCalledLater]
)
def test_a_none_of_one_s_own_in_a_comprehension_is_not_blamed_on_the_frozen_weight(layer_class):
    """Read without columns, the comprehension's frame was given its whole statement, whose
    ``x.grad`` it could not resolve among its own names: the frozen bias was advised on."""
    layer = frozen_bias_run_forward(layer_class(3))
    with pytest.raises(TypeError, match="NoneType") as caught:
        layer.backward(lambda p: None)
    assert not isinstance(caught.value, LayerTypeError), caught.value


class DoublesItsFiredWeightInAComprehension(ScaleShift):
    """A ScaleShift that fires both its parameters, then doubles the weight's gradient in a
    comprehension whose ``g`` shadows a ``g`` of the backward's own (its output gradient)."""

    def _backward(self, dz, callback):
        (x,) = self.inputs
        g = dz
        self.bias.grad += g.sum(axis=0)
        self.weight.grad += (g * x.value).sum(axis=0)
        self.bias.inc_update(callback)
        self.weight.inc_update(callback)
        [np.multiply(g, 2, out=g) for g in (self.weight.grad,)]


def test_a_fired_gradient_written_in_a_comprehension_is_named_by_the_comprehension_s_names():
    """Read without columns, the comprehension's frame was left unread and its statement read
    with the backward's names alone, where ``g`` is ``dz``: the fired weight's write came out
    as numpy's bare "output array is read-only"."""
    with pytest.raises(NetworkError) as caught:
        trained_as(DoublesItsFiredWeightInAComprehension, "comprehension", build())
    said = str(caught.value)
    assert "layer 'ss1' wrote into the gradient of 'ss1.weight' after firing it" in said, said


class DoublesItsOwnInAComprehensionBesideAFiredGradient(ScaleShift):
    """A correct ScaleShift that, after firing, doubles a read-only array of its own in a
    comprehension whose ``g`` shadows a ``g`` of the backward's own, the fired bias's gradient,
    which it only read (allowed)."""

    def _backward(self, dz, callback):
        super()._backward(dz, callback)
        g = self.bias.grad
        own = np.broadcast_to(np.zeros(1), g.shape)  # read-only
        [np.multiply(g, 2, out=g) for g in (own,)]


class DoublesItsOwnInANestedComprehensionBesideAFiredGradient(ScaleShift):
    """As :class:`DoublesItsOwnInAComprehensionBesideAFiredGradient`, the ``g`` bound by an
    inner comprehension: the outer one's frame, which binds no ``g``, read it with the
    backward's."""

    def _backward(self, dz, callback):
        super()._backward(dz, callback)
        g = self.bias.grad
        own = np.broadcast_to(np.zeros(1), g.shape)  # read-only
        [[np.multiply(g, 2, out=g) for g in row] for row in ((own,),)]


@pytest.mark.parametrize(
    "layer_class",
    [
        DoublesItsOwnInAComprehensionBesideAFiredGradient,
        DoublesItsOwnInANestedComprehensionBesideAFiredGradient,
    ],
)
def test_a_comprehension_s_own_name_is_not_read_as_the_backward_s(layer_class):
    """The backward's frame read the comprehension's ``out=g`` with its own ``g``, the fired
    bias's gradient (with columns too: its failing span is the whole comprehension), as did
    an outer comprehension's frame for an inner one's ``g``: the bias was named for the
    layer's write into its own array."""
    with pytest.raises(LayerError, match="read-only") as caught:
        trained_as(layer_class, "shadowed", build())
    assert not isinstance(caught.value, NetworkError), caught.value


class CountsInAnExpression(Layer):
    """Adds float inputs into an int64 buffer of its own, by ``out=`` inside a longer
    expression."""

    num_inputs = 2

    def __init__(self) -> None:
        super().__init__()
        self.seen = np.zeros(3, np.int64)

    def _forward(self, x, labels):
        return np.add(self.seen, x.value.sum(0), out=self.seen) + labels.value


def test_an_out_buffer_inside_an_expression_is_not_blamed_on_a_feed_of_its_dtype():
    """Read as its whole statement, the line's ``out=`` was not found (the statement is an
    assignment of a sum): the int64 feed was blamed for the layer's own buffer."""
    net = Network()
    net.add("counts", CountsInAnExpression(), inputs=["x", "labels"])
    feeds = {"x": Arg(np.ones((4, 3))), "labels": Arg(np.ones((4, 3), np.int64))}
    with pytest.raises(TypeError, match=r"^Cannot cast ufunc 'add' output") as caught:
        net.forward(feeds)
    assert type(caught.value) is not NetworkError, caught.value
