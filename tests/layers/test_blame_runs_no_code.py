"""Telling whose a layer's error is (a callback's, a feed's, a frozen weight's) reads the
objects it comes upon as Python made them: no code of one's own runs (a ``__getattr__``, a
property, a metaclass's), and an error from one never comes out in place of the layer's."""

import numpy as np

from distconv import Arg
from tests.layers.researcher_layers import Scale


class Delegates:
    """A sync strategy that hands unknown attributes on to what it wraps, a dict of its own:
    asked for ``__func__``, it raises KeyError."""

    def __init__(self) -> None:
        self.seen = []
        self._inner = {}

    def __getattr__(self, name):
        return self._inner[name]

    def __call__(self, p) -> None:
        self.seen.append(p.name)


def test_a_callback_s_own_getattr_is_not_run_by_backward():
    """Each backward asked its callback ``getattr(callback, "__func__", callback)`` to tell
    a C function (which gets a frame of its own) from a Python one: a callback's own
    ``__getattr__`` ran, on the healthy path, and its KeyError came out of every backward."""
    layer = Scale(3, name="scale")
    layer.forward(Arg(np.ones((2, 3))))
    layer.output.grad = np.ones((2, 3))
    sync = Delegates()
    layer.backward(sync)
    assert sync.seen == ["scale.w", "scale.b"]
