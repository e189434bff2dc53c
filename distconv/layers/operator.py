"""Operators: parameter-free maps from several inputs into a Mixed layer's output.

An operator is Paddle's ``Operator``: like a projection it *adds* into the output it is handed
(``forward(inputs, out)``) and adds into its inputs' gradients (``backward(inputs, dout)``), but
it combines several of the layer's inputs (named by ``input_indices``) and owns no parameter, so
it takes no callback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distconv.arg import Arg
from distconv.kernels.conv_per_sample import per_sample_conv_backward, per_sample_conv_forward
from distconv.kernels.shape import is_int, volume
from distconv.layers.convolution import Convolution
from distconv.layers.part import LayerPart


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
        # int() took 1.9 for 1, True for 1 and "01" for (0, 1): another operand, with no error
        try:
            indices = () if isinstance(input_indices, str) else tuple(input_indices)
        except TypeError:  # not a sequence at all
            indices = ()
        if len(indices) != self.num_operands or not all(is_int(i) and i >= 0 for i in indices):
            raise self.fail(
                f"needs {self.num_operands} non-negative input indices (ints), "
                f"got {input_indices!r}"
            )
        self.input_indices = tuple(int(i) for i in indices)
        self.out_width = out_width

    def forward(self, inputs: Sequence[Arg], out: Any) -> None:
        """Add the result of the operands ``inputs`` into ``out`` ``(N, width)`` (in place); a
        subclass writes it."""
        raise NotImplementedError(str(self.fail("has no forward(inputs, out) of its own")))

    def backward(self, inputs: Sequence[Arg], dout: Any) -> None:
        """Add the operands' gradients from ``dout``; a subclass writes it."""
        raise NotImplementedError(str(self.fail("has no backward(inputs, dout) of its own")))

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
        try:
            self.scale = float(scale)
        except (TypeError, ValueError, OverflowError):  # float's own names no layer, no argument
            raise self.fail(f"scale must be a number, got {scale!r}") from None

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


class ConvOperator(Convolution, Operator):
    """Convolution with a different filter per sample (Paddle's ``ConvOperator``).

    Input ``image`` holds flattened images, input ``filter`` one flattened filter bank per
    sample; sample ``n``'s output is ``conv(image[n], filter[n])``. It runs on
    :mod:`distconv.kernels.conv_per_sample`: on the CPU each chunk of samples multiplies its own
    filters with its own im2col columns, on parallel threads; on a GPU cuDNN runs it as the
    grouped convolution it is (``groups = N * groups`` over one image of ``N * C`` channels, as
    PyTorch users write it with ``F.conv2d(x.reshape(1, N*C, ...), f.reshape(N*O, ...),
    groups=N*groups)``).

    Args:
        in_channels: ``C``.
        out_channels: ``O`` (filters per sample).
        kernel_size, stride, padding, dilation: an int, or one value per spatial axis.
        groups: independent channel groups.

    Keyword-only:
        input_size: spatial size of one image (an int for a square 2-D image); required.
        input_indices: the layer inputs holding the images and the filters.

    Shape:
        - Image: ``(N, C * prod(input_size))``.
        - Filter: ``(N, O * C/groups * prod(kernel_size))``, each row an ``(O, C/groups, *k)``
          filter bank (PyTorch's weight layout).
        - Output: ``(N, O * prod(output_size))``, ``out = (in + 2p - d(k-1) - 1) // s + 1``.

    Attributes:
        output_size: spatial size of one output image.
    """

    # refused as the conv layers refuse it: integer images would compute in float64
    # (result_type with float32 filters), not in the filters' dtype
    takes_integer_values = False

    def _build(self, input_indices: Sequence[int] = (0, 1)) -> None:
        spec = self._make_spec()
        if spec.input_size is None:
            raise self.fail("needs input_size, the spatial size of one image")
        self.in_width, out_width = spec.flat_widths()
        Operator.__init__(self, input_indices, out_width)
        self.filter_width = spec.out_channels * volume(spec.weight_shape[1:])

    def _operands(self, inputs: Sequence[Arg]) -> tuple[Any, Any]:
        """Images ``(N, C, *sp)`` and filters ``(N, O, C/G, *k)``."""
        i_img, i_filt = self.input_indices
        x = self._rows(inputs[0], self.in_width, f"image (input {i_img})")
        f = self._rows(inputs[1], self.filter_width, f"filter (input {i_filt})")
        n = x.shape[0]
        images = x.reshape(n, self.in_channels, *self.input_size)
        return images, f.reshape(n, *self.spec.weight_shape)  # one (O, C/G, *k) bank a sample

    def forward(self, inputs: Sequence[Arg], out: Any) -> None:
        images, filters = self._operands(inputs)
        out += per_sample_conv_forward(images, filters, self.spec.geom).reshape(out.shape)

    def backward(self, inputs: Sequence[Arg], dout: Any) -> None:
        dx, dw = self._grad_rows(inputs[0]), self._grad_rows(inputs[1])
        if dx is None and dw is None:
            return
        images, filters = self._operands(inputs)
        dy = dout.reshape(dout.shape[0], self.out_channels, *self.output_size)
        need_dx, need_dw = dx is not None, dw is not None
        gx, gw = per_sample_conv_backward(dy, images, filters, self.spec.geom, need_dx, need_dw)
        if gx is not None:
            dx += gx.reshape(dx.shape)
        if gw is not None:
            dw += gw.reshape(dw.shape)

    def __repr__(self) -> str:
        return f"{self.label}({self._conv_repr()}, inputs={self.input_indices})"
