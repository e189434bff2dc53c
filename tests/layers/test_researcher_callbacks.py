"""A layer that calls its callback itself, run by hand: the callback's own errors pass as they
are, whatever kind of callable it is (a sync strategy is an object with ``__call__``)."""

import functools

import numpy as np
import pytest

from distconv import Arg
from distconv.layers.base import LayerError
from tests.layers.test_researcher_layer import FiresDirectly


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
