"""Fully connected layer: ``y = x W^T + b`` with PyTorch's ``(out, in)`` weight layout."""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.kernels.activation import ActivationFunction
from distconv.layers.base import Layer, grad_target
from distconv.parameter import Parameter, UpdateCallback


class FullyConnected(Layer):
    """``y = x W^T + b``; inputs of more than two axes are flattened per sample.

    Args:
        in_features: features per sample (``C*H*W`` for an image input).
        out_features: outputs per sample.
        bias: whether to add a bias.
        act: activation applied to the output.
        init: weight initialiser name.
        dtype: parameter dtype.
        weight: share an existing ``(out, in)`` weight Parameter.
        name: layer name.

    Shape:
        - Input: ``(N, in_features)`` or ``(N, *)`` with ``in_features`` elements per sample.
        - Output: ``(N, out_features)``; sequence offsets pass through.

    Attributes:
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` or None.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        act: str | ActivationFunction | None = None,
        *,
        init: str = "msra",
        dtype: Any = np.float32,
        weight: Parameter | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(act=act, name=name)
        if in_features < 1 or out_features < 1:
            raise self.fail(f"in_features={in_features}, out_features={out_features} must be >= 1")
        self.in_features, self.out_features = in_features, out_features
        self.weight = self.make_weight(
            "weight",
            (out_features, in_features),
            init=init,
            fan_in=in_features,
            fan_out=out_features,
            dtype=dtype,
            shared=weight,
        )
        self.bias = self.make_bias("bias", (out_features,), dtype) if bias else None

    def _flat(self, x: Arg) -> Any:
        v = x.value
        n = v.shape[0]
        if v.ndim < 2 or v.size != n * self.in_features:
            raise self.fail(
                f"expected {self.in_features} features per sample, got input shape {tuple(v.shape)}"
            )
        return v.reshape(n, self.in_features)

    def _forward(self, x: Arg) -> Any:
        y = self._flat(x) @ self.weight.value.T
        if self.bias is not None:
            y += self.bias.value
        return y

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        x = self.inputs[0]
        if self.bias is not None and not self.bias.static:
            self.bias.grad += dz.sum(axis=0)
            self.bias.inc_update(callback)
        dx = grad_target(x)
        if dx is not None:
            dx += (dz @ self.weight.value).reshape(dx.shape)
        if not self.weight.static:
            self.weight.grad += dz.T @ self._flat(x)
        self.weight.inc_update(callback)
