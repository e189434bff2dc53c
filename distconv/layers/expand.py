"""FeatureMapExpand: copy each sample's features into ``num_filters`` feature maps."""

from __future__ import annotations

from typing import Any

from distconv.arg import Arg
from distconv.backend import get_array_module, sum_dtype
from distconv.kernels.activation import ActivationFunction
from distconv.kernels.shape import is_int, volume
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target, values_of
from distconv.parameter import UpdateCallback


class FeatureMapExpand(Layer):
    """Repeat each sample's ``width`` features ``num_filters`` times.

    Paddle's ``FeatureMapExpandLayer``. As a row vector (the default) the sample is copied
    whole, ``num_filters`` times one after the other: viewed as ``(N, num_filters, width)``,
    every row is the input, so the output reads as ``num_filters`` feature maps of one
    image. As a column vector each element is repeated ``num_filters`` times in place: viewed
    as ``(N, width, num_filters)``, every column is the input. Backward sums the copies.

    Args:
        num_filters: how many copies.
        as_row_vector: copy the whole sample (True) or each element (False).
        act: activation applied to the output.
        name: layer name.

    Shape:
        - Input: ``(N, *)`` with ``width`` elements per sample.
        - Output: ``(N, num_filters * width)``; sequence offsets pass through.
    """

    def __init__(
        self,
        num_filters: int,
        as_row_vector: bool = True,
        act: str | ActivationFunction | None = None,
        *,
        name: str | None = None,
    ) -> None:
        super().__init__(act=act, name=name)
        if not is_int(num_filters) or num_filters < 1:
            raise self.fail(f"num_filters={num_filters!r} must be an int >= 1")
        self.num_filters = int(num_filters)
        self.as_row_vector = bool(as_row_vector)

    def settings(self) -> dict[str, Any]:
        """:meth:`Layer.settings`, and the copies and their layout, which no parameter shows."""
        return super().settings() | {
            "num_filters": self.num_filters,
            "as_row_vector": self.as_row_vector,
        }

    def _forward(self, x: Arg) -> Any:
        v = x.value
        if v is None or v.ndim < 1:
            raise self.fail(f"expected an input of shape (N, *), got {x}")
        v = values_of(self, x)  # integer copies: an activation truncated them (sigmoid to 0)
        xp = get_array_module(v)
        flat = v.reshape(v.shape[0], volume(v.shape[1:]))
        if self.as_row_vector:
            return xp.tile(flat, (1, self.num_filters))
        return xp.repeat(flat, self.num_filters, axis=1)

    def backward(self, callback: UpdateCallback) -> None:
        # As Paddle's layer: with no input gradient to fill there is nothing to do, not even the
        # activation's backward.
        if self.inputs and grad_target(self.inputs[0]) is None:
            return
        super().backward(callback)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        dx = grad_target(self.inputs[0])
        n, f = dz.shape[0], self.num_filters
        width = dz.shape[1] // f  # not -1: it cannot size an empty batch
        copies, axis = ((n, f, width), 1) if self.as_row_vector else ((n, width, f), 2)
        # 16-bit copies summed in float32: numpy adds bfloat16 in bfloat16 (4096 copies of 0.1
        # summed to 32)
        dx += dz.reshape(copies).sum(axis=axis, dtype=sum_dtype(dz.dtype)).reshape(dx.shape)
