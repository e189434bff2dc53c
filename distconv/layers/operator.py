"""Operators: parameter-free maps from several inputs into a Mixed layer's output.

An operator is Paddle's ``Operator``: like a projection it *adds* into the output it is handed
(``forward(inputs, out)``) and adds into its inputs' gradients (``backward(inputs, dout)``), but
it combines several of the layer's inputs (named by ``input_indices``) and owns no parameter, so
it takes no callback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module
from distconv.kernels.im2col import col2im, im2col_view
from distconv.kernels.shape import ConvGeometry, as_tuple
from distconv.layers.projection import IntOrTuple, LayerPart


class Operator(LayerPart):
    """Base of operators: which of the layer's inputs they read, and the output width.

    Args:
        input_indices: positions, among the owning layer's inputs, of this operator's operands.
        out_width: columns it writes, or None when that follows from the inputs.
    """

    #: how many operands the operator takes
    num_operands = 2

    def __init__(self, input_indices: Sequence[int], out_width: int | None = None) -> None:
        super().__init__()
        self.input_indices = tuple(int(i) for i in input_indices)
        if len(self.input_indices) != self.num_operands or min(self.input_indices) < 0:
            raise self.fail(
                f"needs {self.num_operands} non-negative input indices, got {self.input_indices}"
            )
        self.out_width = out_width

    def forward(self, inputs: Sequence[Arg], out: Any) -> None:
        """Add the result of the operands ``inputs`` into ``out`` ``(N, width)`` (in place)."""
        raise NotImplementedError

    def backward(self, inputs: Sequence[Arg], dout: Any) -> None:
        """Add the operands' gradients from ``dout``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{self.label}(inputs={self.input_indices})"


class DotMulOperator(Operator):
    """``out += scale * a * b``, element by element (Paddle's ``DotMulOperator``).

    Args:
        scale: constant factor.
        input_indices: the layer inputs holding ``a`` and ``b``.

    Shape:
        - Inputs: ``a`` and ``b`` of ``(N, width)`` each, ``width`` the layer's size.
        - Output: ``(N, width)``.
    """

    def __init__(self, scale: float = 1.0, input_indices: Sequence[int] = (0, 1)) -> None:
        super().__init__(input_indices)
        self.scale = float(scale)

    def _operands(self, inputs: Sequence[Arg], width: int) -> tuple[Any, Any]:
        a, b = (self._rows(arg, width, f"input {i}") for arg, i in zip(inputs, self.input_indices))
        return a, b

    def forward(self, inputs: Sequence[Arg], out: Any) -> None:
        a, b = self._operands(inputs, out.shape[1])
        out += self.scale * a * b

    def backward(self, inputs: Sequence[Arg], dout: Any) -> None:
        a, b = self._operands(inputs, dout.shape[1])
        for arg, other in ((inputs[0], b), (inputs[1], a)):
            g = self._grad_rows(arg)
            if g is not None:
                g += self.scale * dout * other

    def __repr__(self) -> str:
        return f"{self.label}(scale={self.scale}, inputs={self.input_indices})"


class ConvOperator(Operator):
    """Convolution with a different filter per sample (Paddle's ``ConvOperator``).

    Input ``image`` holds flattened images, input ``filter`` one flattened filter bank per
    sample; sample ``n``'s output is ``conv(image[n], filter[n])``. All samples run at once as
    one batched matrix product over im2col columns.

    Args:
        in_channels: ``C``.
        out_channels: ``O`` (filters per sample).
        input_size: spatial size of one image (an int for a square 2-D image).
        kernel_size, stride, padding, dilation: an int, or one value per spatial axis.
        groups: independent channel groups.
        input_indices: the layer inputs holding the images and the filters.

    Shape:
        - Image: ``(N, C * prod(input_size))``.
        - Filter: ``(N, O * C/groups * prod(kernel_size))``, each row an ``(O, C/groups, *k)``
          filter bank (PyTorch's weight layout).
        - Output: ``(N, O * prod(output_size))``, ``out = (in + 2p - d(k-1) - 1) // s + 1``.

    Attributes:
        output_size: spatial size of one output image.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        input_size: IntOrTuple,
        kernel_size: IntOrTuple,
        stride: IntOrTuple = 1,
        padding: IntOrTuple = 0,
        dilation: IntOrTuple = 1,
        groups: int = 1,
        input_indices: Sequence[int] = (0, 1),
    ) -> None:
        nd = 2 if isinstance(input_size, int) else len(input_size)
        self.input_size = as_tuple(input_size, nd, "input_size")
        self.geom = ConvGeometry.make(nd, kernel_size, stride, padding, dilation, groups)
        for what, c in (("in_channels", in_channels), ("out_channels", out_channels)):
            if c < 1 or c % groups:
                raise self.fail(f"{what}={c} must be a positive multiple of {groups=}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.output_size = self.geom.out_size(self.input_size)
        if min(self.output_size) < 1:
            raise self.fail(
                f"kernel {self.geom.ksize} (dilation {self.geom.dilation}) is larger than the "
                f"input {self.input_size} padded by {self.geom.pad}"
            )
        super().__init__(input_indices, out_channels * int(np.prod(self.output_size)))
        self.in_width = in_channels * int(np.prod(self.input_size))
        self.filter_width = out_channels * (in_channels // groups) * self.geom.kernel_volume

    def _operands(self, inputs: Sequence[Arg]) -> tuple[Any, Any, Any]:
        """Images ``(N, C, *sp)``, columns ``(N, G, C/G*K, L)``, filters ``(N, G, O/G, C/G*K)``."""
        i_img, i_filt = self.input_indices
        x = self._rows(inputs[0], self.in_width, f"image (input {i_img})")
        f = self._rows(inputs[1], self.filter_width, f"filter (input {i_filt})")
        n, g = x.shape[0], self.geom.groups
        images = x.reshape(n, self.in_channels, *self.input_size)
        col = im2col_view(images, self.geom).reshape(n, g, -1, int(np.prod(self.output_size)))
        return images, col, f.reshape(n, g, self.out_channels // g, -1)

    def forward(self, inputs: Sequence[Arg], out: Any) -> None:
        _, col, w = self._operands(inputs)
        xp = get_array_module(col, w)
        out += xp.matmul(w, col).reshape(out.shape)

    def backward(self, inputs: Sequence[Arg], dout: Any) -> None:
        dx, dw = self._grad_rows(inputs[0]), self._grad_rows(inputs[1])
        if dx is None and dw is None:
            return
        images, col, w = self._operands(inputs)
        xp = get_array_module(col, w)
        dy = dout.reshape(w.shape[:3] + (-1,))  # (N, G, O/G, L)
        if dw is not None:
            dw += xp.matmul(dy, col.swapaxes(-1, -2)).reshape(dw.shape)
        if dx is not None:
            dcol = xp.matmul(w.swapaxes(-1, -2), dy)  # (N, G, C/G*K, L)
            dcol = dcol.reshape(images.shape[:2] + self.geom.ksize + self.output_size)
            dx += col2im(dcol, images.shape, self.geom).reshape(dx.shape)

    def __repr__(self) -> str:
        g = self.geom
        return (
            f"{self.label}({self.in_channels}, {self.out_channels}, input={self.input_size}, "
            f"kernel={g.ksize}, stride={g.stride}, pad={g.pad}, groups={g.groups}, "
            f"inputs={self.input_indices})"
        )
