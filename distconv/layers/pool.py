"""Max and average pooling layers, 2-D and 3-D."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distconv.arg import Arg
from distconv.kernels.activation import ActivationFunction
from distconv.kernels.pool import (
    avg_pool_backward,
    avg_pool_forward,
    max_pool_backward,
    max_pool_forward,
)
from distconv.kernels.shape import ConvGeometry
from distconv.layers.base import Layer, checked
from distconv.layers.inputs import values_of
from distconv.layers.reshape import reshape_hint
from distconv.parameter import UpdateCallback

IntOrTuple = int | Sequence[int]


class PoolNd(Layer):
    """Pooling over ``nd`` spatial axes.

    Args:
        kernel_size: window size, an int or one per axis.
        stride: step between windows; defaults to ``kernel_size``.
        padding: implicit padding on both sides, at most half the window (as in PyTorch).
        act: activation applied to the output.
        name: layer name.

    Shape:
        - Input: ``(N, C, *in)`` (a Mixed's flat rows: ``Reshape(C, H, W)`` them first)
        - Output: ``(N, C, *out)``, ``out = (in + 2p - k) // s + 1`` per axis: floor, as
          PyTorch; Paddle's ``img_pool_layer`` uses ceil. There is no ceil mode, and
          ``padding`` cannot stand in for one (it pads both sides and shifts every window,
          where ceil adds a window at the end): for Paddle's shapes, pad the end of the input
          yourself (a max pool's with -inf, which no window then picks).
    """

    nd = 2
    mode = "max"

    def __init__(
        self,
        kernel_size: IntOrTuple,
        stride: IntOrTuple | None = None,
        padding: IntOrTuple = 0,
        act: str | ActivationFunction | None = None,
        *,
        name: str | None = None,
    ) -> None:
        super().__init__(act=act, name=name)
        stride = kernel_size if stride is None else stride
        # the geometry's checks raise plain ValueErrors: re-raised naming this layer, as Conv's
        self.geom = checked(self, ConvGeometry.make, self.nd, kernel_size, stride, padding)
        if any(2 * p > k for p, k in zip(self.geom.pad, self.geom.ksize)):
            raise self.fail(
                f"padding {self.geom.pad} must be at most half the window {self.geom.ksize}"
            )
        self._state = None

    def _forward(self, x: Arg) -> Any:
        v = values_of(self, x)
        if v.ndim != 2 + self.nd:
            raise self.fail(
                f"expected a {2 + self.nd}-D input (N, C, *spatial), got {v.shape}"
                + reshape_hint(v.shape, self.nd)
            )
        if min(self.geom.out_size(v.shape[2:])) < 1:
            raise self.fail(
                f"window {self.geom.ksize} is larger than the input {tuple(v.shape[2:])} "
                f"padded by {self.geom.pad}"
            )
        if self.mode == "max":
            y, self._state = max_pool_forward(v, self.geom)
            return y
        return avg_pool_forward(v, self.geom)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        x = self.inputs[0]
        if not x.needs_grad:
            return
        # the first gradient into x is written, not added to zeros: x.grad is made here
        dx = x.grad if x.has_grad else None
        if self.mode == "max":
            x.grad = max_pool_backward(dz, self._state, self.geom, x.shape, dx)
        else:
            x.grad = avg_pool_backward(dz, self.geom, x.shape, dx)


class MaxPool2D(PoolNd):
    """2-D max pooling; see :class:`PoolNd`."""

    nd, mode = 2, "max"


class AvgPool2D(PoolNd):
    """2-D average pooling (padding counts as zeros); see :class:`PoolNd`."""

    nd, mode = 2, "avg"


class MaxPool3D(PoolNd):
    """3-D max pooling; see :class:`PoolNd`."""

    nd, mode = 3, "max"


class AvgPool3D(PoolNd):
    """3-D average pooling; see :class:`PoolNd`."""

    nd, mode = 3, "avg"
