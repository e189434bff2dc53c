"""What docs/architecture.md ("Layers") tells the author of a layer of their own is what the
code does: the snippet that takes a shared weight (``make_weight(..., shared=weight)``) runs
as written, each refusal it quotes is the layer's, ``values_of``'s two refusals are the ones
quoted, and each value mistake it says training passes without a word fails
``check_network_grad``, naming the parameter or the layer."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from distconv import Arg, Network, Parameter
from distconv.gradient_check import check_network_grad
from distconv.layers import FullyConnected, MSELoss
from distconv.layers.base import Layer
from distconv.layers.inputs import values_of
from tests.own_model import Affine

DOCS = " ".join(
    (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text().split()
)


def quoted(start: str) -> str:
    """The text between backquotes in the docs that starts with ``start``."""
    found = re.search(rf"`({re.escape(start)}[^`]*)`", DOCS)
    assert found is not None, f"architecture.md quotes nothing starting {start!r}"
    return found.group(1)


class Own(Layer):
    """``x * g``, its weight taken to share as the docs say."""

    def __init__(self, n, *, weight=None, dtype=np.float64, **kwargs):
        super().__init__(**kwargs)
        snippet = quoted("self.g = self.make_weight(")
        names = {"self": self, "n": n, "dtype": dtype, "weight": weight}
        self.g = eval(snippet.removeprefix("self.g = "), names)  # the docs' line, as written

    def _forward(self, x):
        return values_of(self, x) * self.g.value


def test_the_shared_weight_snippet_shares_and_its_quoted_refusals_are_the_layer_s():
    net = Network()
    first = net.add("a", Own(2), "x")
    second = net.add("b", Own(2, weight=first.g), "a")
    assert second.g is first.g and first.g.name == "a.g" and first.g.shared_count == 2
    for bad, start in [
        (Own(3).g, "Own 'c': shared g has shape (3,), needs (2,)"),
        (np.ones(2), "shared g must be a Parameter, got ndarray"),
        (Parameter("i", np.array([1, 2])), "shared g: parameter 'i' has dtype int64"),
    ]:
        with pytest.raises(Exception) as refused:
            Own(2, weight=bad, name="c")
        text = quoted(start).removesuffix(" ...")
        assert text in str(refused.value), (text, str(refused.value))


def test_values_of_refuses_integer_values_and_ids_as_the_docs_quote():
    layer = Own(2, name="o")
    for arg, start in [
        (Arg(np.ones((1, 2), np.int64)), "expected float values, got int64 values"),
        (Arg(ids=np.array([1, 0])), "expected float values, got int64 ids"),
    ]:
        with pytest.raises(Exception) as refused:
            layer.forward(arg)
        text = quoted(start).removesuffix(" ...)").removesuffix(" (...)")
        assert str(refused.value).startswith(f"Own 'o': {text}"), str(refused.value)


class Assigns(Affine):
    def add_to_g(self, share):
        self.g.grad[...] = share


class Broadcasts(Affine):
    def _backward(self, dz, callback):
        self.b.grad += dz.sum()  # a scalar, broadcast into (n,)
        self.b.grad -= dz.sum(0)  # the right share taken back out: the rest is the mistake
        super()._backward(dz, callback)


class HalvesInput(Affine):
    def _backward(self, dz, callback):
        super()._backward(dz, callback)
        self.inputs[0].value *= 0.5


@pytest.mark.parametrize(
    "kind, named",
    [
        (Assigns, r"gradient of param a1\.g\S* is off|param a1\.g: backward twice"),
        (Broadcasts, r"gradient of param a1\.b\S* is off"),
        (HalvesInput, r"the backward of HalvesInput 'a1' wrote into the output of"),
    ],
)
def test_each_mistake_the_docs_say_trains_on_fails_the_network_check(kind, named, rng):
    """Assigned in the user of a shared weight whose backward runs last, broadcast from a
    scalar, or written into the input: ``Affine`` over a tanh FC, its weight shared by a second
    ``Affine`` above."""
    net = Network()
    net.add("fc0", FullyConnected(4, 4, act="tanh", dtype=np.float64), "x")
    first = net.add("a1", kind(4), "fc0")
    net.add("a2", Affine(4, weight=first.g), "a1")
    net.add("fc", FullyConnected(4, 1, dtype=np.float64), "a2")
    net.add("loss", MSELoss(), ["fc", "target"])
    for word in ("assigned instead of added", "broadcast into", "writes into its input"):
        assert word in DOCS
    feeds = {"x": rng.standard_normal((5, 4)), "target": rng.standard_normal((5, 1))}
    with pytest.raises(AssertionError, match=named):
        check_network_grad(net, feeds, loss="loss")
