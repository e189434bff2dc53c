"""A layer that calls its callback itself, run by hand: the callback's own errors pass as they
are, whatever kind of callable it is (a sync strategy is an object with ``__call__``)."""

import functools

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers import FullyConnected, MSELoss
from distconv.layers.base import LayerError, LayerTypeError
from distconv.sync.ps.wire import WireError
from tests.layers.researcher_layers import F64, Scale


class FiresDirectly(Scale):
    """Hands its complete gradients to the callback itself, as a layer of one's own may, not
    through ``inc_update`` (each fires once: the Network accepts it)."""

    def _backward(self, dz, callback):
        self.w.grad += (dz * self.inputs[0].value).sum(0)
        callback(self.w)
        if not self.b.static:
            self.b.grad += dz.sum(0)
            callback(self.b)


def _refuse(p, why: str = "the server refused the push") -> None:
    raise ValueError(why)


class Strategy:
    """Callable as a sync strategy is (``__call__``, which calls ``on_gradient``)."""

    def __call__(self, p) -> None:
        self.on_gradient(p)

    def on_gradient(self, p) -> None:
        _refuse(p)


class Refuses:
    """Callable, raising in its own ``__call__``."""

    def __call__(self, p) -> None:
        raise ValueError("the server refused the push")


@pytest.mark.parametrize(
    "callback",
    [Strategy(), Refuses(), functools.partial(_refuse, why="the server refused the push")],
    ids=["strategy", "callable object", "functools.partial"],
)
def test_a_callback_s_error_passes_whatever_callable_the_callback_is(callback):
    """dacd668a recognised the callback's code by its __code__ (or a bound method's): a
    callable object, as a sync strategy is, and a functools.partial have none, so a layer run
    by hand that calls such a callback itself had its ValueError (a WireError) relabelled
    "FiresDirectly 'scale': backward: the server refused the push", a LayerError."""
    layer = FiresDirectly(4, name="scale")
    layer.forward(Arg(np.ones((5, 4))))
    layer.output.grad = np.ones((5, 4))
    with pytest.raises(ValueError, match=r"^the server refused the push$") as e:
        layer.backward(callback)
    assert not isinstance(e.value, LayerError)


def test_a_callback_s_type_error_is_not_blamed_on_a_frozen_weight(rng):
    """A callback (a sync's, an optimizer's) whose TypeError mentioned None, in a layer with a
    frozen bias, was re-raised as "static parameter(s) ['fc.bias'] have no gradient": the
    bias was never added into, and the callback's own error was hidden behind the advice."""
    net = Network()
    net.add("fc", FullyConnected(3, 2, dtype=F64), inputs="x")
    net.add("loss", MSELoss(), inputs=["fc", "target"])
    net["fc"].bias.set_static(True)
    net.forward({"x": rng.standard_normal((4, 3)), "target": rng.standard_normal((4, 2))})

    def callback(p):
        raise TypeError("'NoneType' object is not subscriptable")  # the callback's own bug

    with pytest.raises(TypeError, match=r"^'NoneType' object is not subscriptable$") as e:
        net.backward(callback)
    assert not isinstance(e.value, LayerTypeError)


@pytest.mark.parametrize(
    ("error", "frozen"),
    [(WireError("the server refused the push"), False), (TypeError("'NoneType' object"), True)],
)
def test_a_callback_s_error_passes_as_it_is_when_the_layer_calls_it_itself(rng, error, frozen):
    """Only a traceback through Parameter.inc_update was the callback's: called by the layer,
    the sync's WireError became "FiresDirectly 'scale': backward: the server refused ...", a
    LayerError a caller catching WireError missed, and a TypeError mentioning None was blamed
    on the frozen bias."""
    net = Network()
    net.add("scale", FiresDirectly(4), inputs="x")
    net.add("loss", MSELoss(), inputs=["scale", "target"])
    net["scale"].b.set_static(frozen)
    net.forward({"x": rng.standard_normal((5, 4)), "target": rng.standard_normal((5, 4))})

    def callback(p):
        raise error

    with pytest.raises(type(error)) as e:
        net.backward(callback)
    assert e.value is error
