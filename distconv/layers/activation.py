"""An activation as a layer of its own (every layer also takes one as its ``act`` option)."""

from __future__ import annotations

from typing import Any

from distconv.arg import Arg
from distconv.kernels.activation import ActivationFunction
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target, values_of
from distconv.parameter import UpdateCallback


class Activation(Layer):
    """``y = act(x)``, elementwise (softmax: over axis 1).

    Args:
        act: ``"relu"``, ``"sigmoid"``, ``"tanh"``, ``"softmax"``, ``"linear"`` or an object.
        name: layer name.
    """

    def __init__(self, act: str | ActivationFunction, *, name: str | None = None) -> None:
        super().__init__(act=act, name=name)

    def _forward(self, x: Arg) -> Any:
        return values_of(self, x)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        dx = grad_target(self.inputs[0])
        if dx is not None:
            dx += dz
