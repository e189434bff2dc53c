"""Convolution layers: 2-D and 3-D, transposed, grouped, dilated, with shared or unshared bias.

One N-d base (:class:`ConvNd`) holds all the logic; ``Conv2D``, ``Conv3D``, ``ConvTranspose2D``
and ``ConvTranspose3D`` only fix the number of spatial axes and the direction, as PyTorch's
``_ConvNd`` does. The arithmetic lives in :mod:`distconv.kernels`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.kernels.activation import ActivationFunction
from distconv.kernels.conv import conv_any_backward, conv_any_forward
from distconv.kernels.shape import ConvGeometry, as_tuple
from distconv.layers.base import Layer, grad_target
from distconv.parameter import Parameter, UpdateCallback

IntOrTuple = int | Sequence[int]
BIAS_KINDS = ("shared", "unshared", None)


def _bias_kind(bias: str | bool | None) -> str | None:
    if bias is True:
        return "shared"
    if bias is False:
        return None
    if bias not in BIAS_KINDS:
        raise ValueError(f"bias must be one of {BIAS_KINDS} (or True/False), got {bias!r}")
    return bias


class ConvNd(Layer):
    """Convolution (or transposed convolution) over ``nd`` spatial axes by im2col/col2im.

    Args:
        in_channels: channels of the input (``C``).
        out_channels: channels of the output (``O``).
        kernel_size, stride, padding, dilation: an int, or one value per spatial axis.
        groups: split input and output channels into this many independent groups.
        bias: ``"shared"`` (one per output channel), ``"unshared"`` (one per output element;
            needs ``input_size``), or None.
        act: activation applied to the output.
        output_padding: (transposed only) extra size added to one side of the output.
        input_size: spatial size of the input; needed only for an unshared bias.
        init: weight initialiser name (``"msra"``, ``"xavier"``, ``"normal"``, ``"zero"``).
        dtype: parameter dtype.
        weight: share an existing weight Parameter instead of creating one.
        name: layer name.

    Shape:
        - Input: ``(N, C, *in)``
        - Output: ``(N, O, *out)`` with, per axis,
          ``out = (in + 2p - d(k-1) - 1) // s + 1`` (convolution) or
          ``out = (in - 1)s - 2p + d(k-1) + output_padding + 1`` (transposed).

    Attributes:
        weight: ``(O, C/groups, *k)``, or ``(C, O/groups, *k)`` when transposed (PyTorch's
            layouts).
        bias: ``(O,)`` shared, ``(O, *out)`` unshared, or None.
    """

    nd = 2
    transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTuple,
        stride: IntOrTuple = 1,
        padding: IntOrTuple = 0,
        dilation: IntOrTuple = 1,
        groups: int = 1,
        bias: str | bool | None = "shared",
        act: str | ActivationFunction | None = None,
        *,
        output_padding: IntOrTuple = 0,
        input_size: IntOrTuple | None = None,
        init: str = "msra",
        dtype: Any = np.float32,
        weight: Parameter | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(act=act, name=name)
        self.geom = ConvGeometry.make(self.nd, kernel_size, stride, padding, dilation, groups)
        for what, n in (("in_channels", in_channels), ("out_channels", out_channels)):
            if n < 1 or n % groups:
                raise self.fail(f"{what}={n} must be a positive multiple of groups={groups}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.output_padding = as_tuple(output_padding, self.nd, "output_padding")
        self._check_output_padding()
        self.bias_kind = _bias_kind(bias)
        self.input_size = (
            None if input_size is None else as_tuple(input_size, self.nd, "input_size")
        )

        w_shape = self._weight_shape()
        self.weight = self.make_weight(
            "weight",
            w_shape,
            init=init,
            fan_in=w_shape[1] * self.geom.kernel_volume,
            fan_out=w_shape[0] * self.geom.kernel_volume,
            dtype=dtype,
            shared=weight,
        )
        self.bias = self._make_bias(dtype)

    # -- construction --------------------------------------------------------------------------
    def _weight_shape(self) -> tuple[int, ...]:
        g = self.geom.groups
        if self.transposed:
            return (self.in_channels, self.out_channels // g, *self.geom.ksize)
        return (self.out_channels, self.in_channels // g, *self.geom.ksize)

    def _check_output_padding(self) -> None:
        try:
            self.geom.check_output_padding(self.output_padding, self.transposed)
        except ValueError as exc:
            raise self.fail(str(exc)) from None

    def out_size(self, in_size: Sequence[int]) -> tuple[int, ...]:
        """Spatial output size for a spatial input size."""
        if self.transposed:
            return self.geom.transpose_out_size(in_size, self.output_padding)
        return self.geom.out_size(in_size)

    def _make_bias(self, dtype: Any) -> Parameter | None:
        if self.bias_kind is None:
            return None
        shape: tuple[int, ...] = (self.out_channels,)
        if self.bias_kind == "unshared":
            if self.input_size is None:
                raise self.fail("an unshared bias needs input_size (the spatial input size)")
            shape += self.out_size(self.input_size)
        return self.make_bias("bias", shape, dtype)

    # -- forward / backward --------------------------------------------------------------------
    def _check_input(self, x: Any) -> None:
        want = 2 + self.nd
        if x.ndim != want:
            raise self.fail(f"expected a {want}-D input (N, C, *spatial), got shape {x.shape}")
        if x.shape[1] != self.in_channels:
            raise self.fail(
                f"expected {self.in_channels} input channels, got {x.shape[1]} "
                f"(input shape {tuple(x.shape)})"
            )
        sp = tuple(x.shape[2:])
        if self.input_size is not None and sp != self.input_size:
            raise self.fail(f"built for spatial size {self.input_size}, got input {x.shape}")
        out = self.out_size(sp)
        if min(out) < 1:
            raise self.fail(
                f"kernel {self.geom.ksize} (dilation {self.geom.dilation}) is larger than the "
                f"input {sp} padded by {self.geom.pad}"
            )

    def _forward(self, x: Arg) -> Any:
        self._check_input(x.value)
        v = x.value
        y = conv_any_forward(
            v, self.weight.value, self.geom, self.transposed, self.out_size(v.shape[2:])
        )
        if self.bias is not None:
            b = self.bias.value
            y += b.reshape((1, -1) + (1,) * self.nd) if self.bias_kind == "shared" else b
        return y

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        x = self.inputs[0]
        if self.bias is not None and not self.bias.static:
            axes = (0,) + tuple(range(2, 2 + self.nd)) if self.bias_kind == "shared" else 0
            self.bias.grad += dz.sum(axis=axes)
            self.bias.inc_update(callback)
        dx_buf = grad_target(x)
        need_dw = not self.weight.static
        if dx_buf is not None or need_dw:
            dx, dw = conv_any_backward(
                dz,
                x.value,
                self.weight.value,
                self.geom,
                self.transposed,
                dx_buf is not None,
                need_dw,
            )
            if dx is not None:
                dx_buf += dx
            if dw is not None:
                self.weight.grad += dw
        self.weight.inc_update(callback)

    def __repr__(self) -> str:
        g = self.geom
        return (
            f"{self.label}({self.in_channels}, {self.out_channels}, kernel={g.ksize}, "
            f"stride={g.stride}, pad={g.pad}, dilation={g.dilation}, groups={g.groups}, "
            f"bias={self.bias_kind}, act={self.act})"
        )


class Conv2D(ConvNd):
    """2-D convolution; see :class:`ConvNd`."""

    nd = 2


class Conv3D(ConvNd):
    """3-D convolution over ``(N, C, D, H, W)``; see :class:`ConvNd`."""

    nd = 3


class ConvTranspose2D(ConvNd):
    """2-D transposed convolution (deconvolution); see :class:`ConvNd`."""

    nd = 2
    transposed = True


class ConvTranspose3D(ConvNd):
    """3-D transposed convolution, the seed's DeConv3D; see :class:`ConvNd`."""

    nd = 3
    transposed = True
