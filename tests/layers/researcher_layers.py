"""Layers of one's own, written from the Layer docstring, that the researcher tests share."""

import numpy as np

from distconv import Parameter
from distconv.layers.base import Layer
from distconv.layers.inputs import values_of

F64 = np.float64


class Scale(Layer):
    """``x * w + b`` per feature, its backward written without a thought for frozen weights."""

    def __init__(self, n: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.w = self.new_param("w", np.ones(n, F64))
        self.b = self.new_param("b", np.zeros(n, F64))

    def _forward(self, x):
        return values_of(self, x) * self.w.value + self.b.value

    def _backward(self, dz, callback):
        x = self.inputs[0]
        if x.needs_grad:
            x.grad += dz * self.w.value
        self.w.grad += (dz * x.value).sum(0)
        self.b.grad += dz.sum(0)
        self.w.inc_update(callback)
        self.b.inc_update(callback)


class Gain(Layer):
    """``x * w``, its weight made outside and registered under a name of the caller's."""

    def __init__(self, weight: Parameter, **kwargs) -> None:
        super().__init__(**kwargs)
        self.w = self.add_param("w", weight)

    def _forward(self, x):
        return values_of(self, x) * self.w.value

    def _backward(self, dz, callback):
        x = self.inputs[0]
        if x.needs_grad:
            x.grad += dz * self.w.value
        self.w.grad += (dz * x.value).sum(0)
        self.w.inc_update(callback)
