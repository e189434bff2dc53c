"""Convolutions: the layers (2-D and 3-D, transposed, grouped, dilated) and the projections.

One N-d base (:class:`ConvNd`) holds all the layer logic; ``Conv2D``, ``Conv3D``,
``ConvTranspose2D`` and ``ConvTranspose3D`` only fix the number of spatial axes and the
direction, as PyTorch's ``_ConvNd`` does. :class:`ConvProjection` is the same convolution as a
part of a :class:`~distconv.layers.mixed.Mixed` layer, reading flattened images. Both check
their arguments and derive shapes through one :class:`~distconv.kernels.shape.ConvSpec`; the
arithmetic lives in :mod:`distconv.kernels`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.init import Initializer
from distconv.kernels.activation import ActivationFunction
from distconv.kernels.bias import add_bias, channel_sums, row_sums
from distconv.kernels.conv import conv_any_backward, conv_any_forward
from distconv.kernels.conv_columns import Columns
from distconv.layers.base import Layer, checked, keeps_for_backward
from distconv.layers.convolution import Convolution
from distconv.layers.inputs import add_grad, values_of
from distconv.layers.part import Projection, WeightSpec
from distconv.layers.reshape import reshape_hint
from distconv.parameter import Parameter, UpdateCallback

BIAS_KINDS = ("shared", "unshared", None)


def _bias_kind(bias: str | bool | None) -> str | None:
    if bias is True:
        return "shared"
    if bias is False:
        return None
    if bias not in BIAS_KINDS:
        raise ValueError(f"bias must be one of {BIAS_KINDS} (or True/False), got {bias!r}")
    return bias


class ConvNd(Convolution, Layer):
    """Convolution (or transposed convolution) over ``nd`` spatial axes by im2col/col2im.

    Args:
        in_channels: channels of the input (``C``).
        out_channels: channels of the output (``O``).
        kernel_size, stride, padding, dilation: an int, or one value per spatial axis.
        groups: split input and output channels into this many independent groups.
        bias: ``"shared"`` (one per output channel), ``"unshared"`` (one per output element;
            needs ``input_size``), or None.
        act: activation applied to the output.

    Keyword-only:
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

    owns_preactivation = True  # a fresh product; the activation may run in place

    nd = 2
    transposed = False
    #: the last forward's columns of its input, for the weight gradient (None: build them)
    _columns: Columns | None = None

    def _build(
        self,
        bias: str | bool | None = "shared",
        act: str | ActivationFunction | None = None,
        *,
        init: str | Initializer = "msra",
        dtype: Any = np.float32,
        weight: Parameter | None = None,
        name: str | None = None,
    ) -> None:
        Layer.__init__(self, act=act, name=name)
        spec = self._make_spec()
        self.output_padding = spec.output_padding
        self.bias_kind = checked(self, _bias_kind, bias)  # the error names the layer
        fan_in, fan_out = spec.fans
        self.weight = self.make_weight(
            "weight",
            spec.weight_shape,
            init=init,
            fan_in=fan_in,
            fan_out=fan_out,
            dtype=dtype,
            shared=weight,
        )
        self.bias = self._make_bias(dtype)

    def out_size(self, in_size: Sequence[int]) -> tuple[int, ...]:
        """Spatial output size for a spatial input size."""
        return checked(self, self.spec.out_size, in_size)

    def _make_bias(self, dtype: Any) -> Parameter | None:
        if self.bias_kind is None:
            return None
        shape: tuple[int, ...] = (self.out_channels,)
        if self.bias_kind == "unshared":
            if self.input_size is None:
                raise self.fail("an unshared bias needs input_size (the spatial input size)")
            shape += self.spec.output_size
        return self.make_bias("bias", shape, dtype)

    # -- forward / backward --------------------------------------------------------------------
    def _check_input(self, x: Any) -> None:
        want = 2 + self.nd
        if x.ndim != want:
            raise self.fail(
                f"expected a {want}-D input (N, C, *spatial), got shape {x.shape}"
                + reshape_hint(x.shape, self.nd, self.in_channels)
            )
        if x.shape[1] != self.in_channels:
            raise self.fail(
                f"expected {self.in_channels} input channels, got {x.shape[1]} "
                f"(input shape {tuple(x.shape)})"
            )
        sp = tuple(x.shape[2:])
        if self.input_size is not None and sp != self.input_size:
            raise self.fail(f"built for spatial size {self.input_size}, got input {x.shape}")
        self.out_size(sp)

    def _forward(self, x: Arg) -> Any:
        v = values_of(self, x)
        self._check_input(v)
        # the weight gradient reuses the forward's columns; kept only when it will be wanted
        wanted = not (self.weight.static or self.transposed) and keeps_for_backward()
        self._columns = Columns() if wanted else None
        y = conv_any_forward(
            v,
            self.weight.value,
            self.geom,
            self.transposed,
            self.out_size(v.shape[2:]),
            self._columns,
        )
        if self.bias is None:
            return y
        b = self.bias.value
        return add_bias(y, b.reshape((1, -1) + (1,) * self.nd) if self.bias_kind == "shared" else b)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        x = self.inputs[0]
        if self.bias is not None and not self.bias.static:
            shared = self.bias_kind == "shared"
            self.bias.grad += channel_sums(dz, dz.shape[1]) if shared else row_sums(dz)
            self.bias.inc_update(callback)
        need_dw = not self.weight.static
        if x.needs_grad or need_dw:
            dx, dw = conv_any_backward(
                dz,
                x.value,
                self.weight.value,
                self.geom,
                self.transposed,
                x.needs_grad,
                need_dw,
                self._columns,
            )
            if dx is not None:
                add_grad(x, dx)
            if dw is not None:
                self.weight.grad += dw
        self._columns = None  # a second backward rebuilds them
        self.weight.inc_update(callback)

    def __repr__(self) -> str:
        return (
            f"{self.label}({self.in_channels}, {self.out_channels}, {self.spec.describe()}, "
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
    """3-D transposed convolution, Paddle's DeConv3D layer; see :class:`ConvNd`."""

    nd = 3
    transposed = True


# -- projections ----------------------------------------------------------------------------------
class ConvProjection(Convolution, Projection):
    """Convolution of flattened images: Paddle's ``ConvProjection``.

    Input rows are images ``(C, *input_size)`` flattened, as Paddle's projections see them; the
    output rows are the ``(O, *output_size)`` results flattened the same way, so per-channel
    (shared) bias in the owning layer sees channel-major columns.

    Args:
        in_channels: ``C``.
        out_channels: ``O``.
        kernel_size, stride, padding, dilation: an int, or one value per spatial axis.
        groups: independent channel groups.

    Keyword-only:
        input_size: spatial size of one input image (an int for a square 2-D image); required.
        output_padding: (transposed only) extra size on one side of the output.
        init, dtype, weight: see :class:`~distconv.layers.part.Projection`.

    Shape:
        - Input: ``(N, C * prod(input_size))``.
        - Output: ``(N, O * prod(output_size))`` with, per axis, the formulas of
          :class:`ConvNd`.

    Attributes:
        weight: ``(O, C/groups, *k)``, or ``(C, O/groups, *k)`` when transposed.
        spec: the checked :class:`~distconv.kernels.shape.ConvSpec`.
        output_size: spatial size of one output image.
    """

    # refused as the conv layers refuse it: an integer image would compute in float64
    # (result_type with a float32 weight), not in the weight's dtype
    takes_integer_values = False

    def _build(
        self,
        *,
        init: str | Initializer = "msra",
        dtype: Any = np.float32,
        weight: Parameter | None = None,
    ) -> None:
        spec = self._make_spec()
        if spec.input_size is None:
            raise self.fail("needs input_size, the spatial size of one input image")
        weight_spec = WeightSpec(spec.weight_shape, spec.fans, init, dtype, weight)
        Projection.__init__(self, *spec.flat_widths(), weight_spec)

    def _images(self, input: Arg) -> Any:
        x = self._rows(input, self.in_width)
        return x.reshape(x.shape[0], self.in_channels, *self.input_size)

    def forward(self, input: Arg, out: Any) -> None:
        w, spec = self.weight.value, self.spec
        y = conv_any_forward(self._images(input), w, spec.geom, self.transposed, self.output_size)
        out += y.reshape(out.shape)

    def _backward(self, input: Arg, dout: Any) -> None:
        dx_buf = self._grad_rows(input)
        need_dw = self.needs_weight_grad
        if dx_buf is None and not need_dw:
            return
        dy = dout.reshape(dout.shape[0], self.out_channels, *self.output_size)
        w, geom = self.weight.value, self.spec.geom
        need_dx = dx_buf is not None
        dx, dw = conv_any_backward(
            dy, self._images(input), w, geom, self.transposed, need_dx, need_dw
        )
        if dx is not None:
            dx_buf += dx.reshape(dx_buf.shape)
        if dw is not None:
            self.weight.grad += dw

    def __repr__(self) -> str:
        return f"{self.label}({self._conv_repr()})"


class ConvTransposeProjection(ConvProjection):
    """Transposed convolution of flattened images (Paddle's ``ConvTransProjection``).

    Arguments and shapes as :class:`ConvProjection` with the transposed formula; the weight is
    ``(C, O/groups, *k)``.
    """

    transposed = True
