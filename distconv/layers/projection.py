"""Projections: parameterised maps from one input into (a slice of) a layer's output.

A projection is Paddle's ``Projection``. It never owns an output: ``forward(input, out)`` *adds*
its result into the array it is handed (the whole output of a
:class:`~distconv.layers.mixed.Mixed` layer, or one column slice of a
:class:`~distconv.layers.concat.Concatenate2`), and ``backward(input, dout, callback)`` adds into
the input's gradient and its parameter's gradient, then calls ``inc_update``. The input gradient is
computed before ``inc_update`` because the callback may change the weight (a local optimizer
step), exactly as Paddle's projections order it.

A projection is built free-standing with its sizes. Its parameter is created when a layer adopts
it with :meth:`LayerPart.attach`: through the layer's ``new_param`` (or ``add_param`` for a shared
weight), so the parameter is named ``"<layer>.<key>.weight"``, counts the layer as one user, is
listed by the layer's ``parameters()`` and follows the layer's renames.

Inputs are read as rows: ``(N, width)``, or ``(N, *)`` flattened per sample, as Paddle's matrices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module, is_gpu_array, to_host
from distconv.init import Initializer
from distconv.kernels.conv import conv_any_backward, conv_any_forward
from distconv.kernels.shape import ConvGeometry, as_tuple
from distconv.layers.base import Layer, LayerError, grad_target
from distconv.parameter import Parameter, UpdateCallback

IntOrTuple = int | Sequence[int]


def ones(shape: tuple[int, ...], fan_in: int, fan_out: int, rng: np.random.Generator) -> np.ndarray:
    """Initialiser: all ones (an element-wise or scalar weight that starts as the identity)."""
    return np.ones(shape)


def unit_normal(
    shape: tuple[int, ...], fan_in: int, fan_out: int, rng: np.random.Generator
) -> np.ndarray:
    """Initialiser: standard normal, PyTorch's default for embedding tables."""
    return rng.standard_normal(shape)


# -- scatter-add ----------------------------------------------------------------------------------
class RowScatter:
    """Adds ``rows[k]`` into ``target[index[k]]`` for every ``k``; repeated indices are summed.

    On the CPU the index is sorted once (at construction) and each run of equal indices is
    summed by ``add.reduceat``, so the final add touches every target row at most once (fast on
    every numpy, unlike ``add.at`` before 2.0); on the GPU ``add.at`` is one atomic kernel.

    Args:
        index: ``(M,)`` integer target rows.
        keep: optional ``(M,)`` bool mask; entries where it is False are left out.
    """

    def __init__(self, index: Any, keep: Any = None) -> None:
        xp = get_array_module(index)
        pos = xp.arange(len(index)) if keep is None else xp.flatnonzero(keep)
        self._gpu = is_gpu_array(index)
        if self._gpu:
            self._pos, self._index = pos, index[pos]
            return
        order = pos[xp.argsort(index[pos], kind="stable")]
        sorted_index = index[order]
        first = xp.ones(len(order), dtype=bool)
        first[1:] = sorted_index[1:] != sorted_index[:-1]
        self._pos = order
        self._segments = xp.flatnonzero(first)
        self._targets = sorted_index[self._segments]

    def add(self, target: Any, rows: Any) -> None:
        """``target[index[k]] += rows[k]`` for every kept ``k``."""
        xp = get_array_module(target)
        if self._gpu:
            xp.add.at(target, self._index, rows[self._pos])
        elif len(self._pos):
            target[self._targets] += xp.add.reduceat(rows[self._pos], self._segments, axis=0)


# -- what projections and operators share --------------------------------------------------------
class LayerPart:
    """A piece of a layer (a projection or an operator): its owner, its key, errors, input rows.

    Attributes:
        owner: the layer that adopted this part (None until :meth:`attach`).
        key: the part's key in that layer (``"proj0"``, ``"op1"``).
    """

    def __init__(self) -> None:
        self.owner: Layer | None = None
        self.key: str | None = None

    def attach(self, owner: Layer, key: str) -> None:
        """Adopt this part into ``owner`` under ``key`` (and create its parameters there).

        Raises:
            LayerError: the part already serves a layer (it keeps per-batch state, so it can't
                serve two).
        """
        if self.owner is not None:
            raise self.fail(
                f"already attached to {self.owner.label} as {self.key!r}; "
                "build a new one for each layer (share weights with weight=)"
            )
        self.owner, self.key = owner, key
        self._make_params()

    def _make_params(self) -> None:
        """Create parameters in the owner; none by default."""

    @property
    def label(self) -> str:
        """Type and key, as error messages show the part: ``TableProjection 'proj0'``."""
        cls, key = type(self).__name__, getattr(self, "key", None)
        return cls if key is None else f"{cls} {key!r}"

    def fail(self, message: str) -> LayerError:
        """A LayerError naming the owning layer (once attached) and this part."""
        if getattr(self, "owner", None) is None:
            return LayerError(f"{self.label}: {message}")
        return self.owner.fail(f"{self.label}: {message}")

    def _rows(self, arg: Arg, width: int | None, what: str = "input") -> Any:
        """``arg.value`` as ``(N, width)`` rows (``width=None``: whatever it has per sample)."""
        v = arg.value
        if v is None:
            raise self.fail(f"the {what} carries no value (ids only?)")
        n = int(v.shape[0]) if v.ndim else 0
        if v.ndim < 2 or (width is not None and v.size != n * width):
            want = "rows" if width is None else f"{width} columns per row"
            raise self.fail(f"expected {what} of {want}, got shape {tuple(v.shape)}")
        return v.reshape(n, -1)

    @staticmethod
    def _grad_rows(arg: Arg) -> Any:
        """The gradient buffer of ``arg`` as an ``(N, width)`` view, or None if it wants none.

        The view must share memory with the buffer for ``+=`` to land, so a non-contiguous
        buffer is first replaced by a contiguous copy.
        """
        buf = grad_target(arg)
        if buf is None:
            return None
        if not buf.flags.c_contiguous:
            arg.grad = buf = get_array_module(buf).ascontiguousarray(buf)
        return buf.reshape(buf.shape[0], -1)


# -- the projection base -------------------------------------------------------------------------
class Projection(LayerPart):
    """Base of all projections: sizes, at most one parameter, and the backward order.

    Subclasses implement :meth:`forward` (add into ``out``) and :meth:`_backward` (add into the
    input's and the weight's gradients); :meth:`backward` then calls ``inc_update``.

    Args:
        in_width: columns of the input (None for a projection that reads ``Arg.ids``).
        out_width: columns it writes.
        weight_shape: shape of its parameter, or None for a projection without one.
        fan_in, fan_out: for the initialiser.
        init: initialiser name or function.
        dtype: parameter dtype.
        weight: share this existing Parameter instead of creating one (shape must match).

    Attributes:
        weight: the Parameter once attached, or None.
    """

    def __init__(
        self,
        in_width: int | None,
        out_width: int,
        *,
        weight_shape: tuple[int, ...] | None = None,
        fan_in: int = 1,
        fan_out: int = 1,
        init: str | Initializer = "msra",
        dtype: Any = np.float32,
        weight: Parameter | None = None,
    ) -> None:
        super().__init__()
        for what, w in (("in_width", in_width), ("out_width", out_width)):
            if w is not None and w < 1:
                raise self.fail(f"{what}={w} must be >= 1")
        if weight is not None and (weight_shape is None or weight.shape != weight_shape):
            raise self.fail(f"shared weight has shape {weight.shape}, needs {weight_shape}")
        self.in_width, self.out_width = in_width, out_width
        self._weight_spec = (weight_shape, fan_in, fan_out, init, dtype)
        self._shared = weight
        self.weight: Parameter | None = None

    def _make_params(self) -> None:
        shape, fan_in, fan_out, init, dtype = self._weight_spec
        if shape is None:
            return
        self.weight = self.owner.make_weight(
            f"{self.key}.weight",
            shape,
            init=init,
            fan_in=fan_in,
            fan_out=fan_out,
            dtype=dtype,
            shared=self._shared,
        )

    @property
    def needs_weight_grad(self) -> bool:
        return self.weight is not None and not self.weight.static

    def forward(self, input: Arg, out: Any) -> None:
        """Add this projection of ``input`` into ``out`` ``(N, out_width)`` (in place)."""
        raise NotImplementedError

    def backward(self, input: Arg, dout: Any, callback: UpdateCallback) -> None:
        """Add gradients into ``input`` and the weight from ``dout``; then ``inc_update``."""
        self._backward(input, dout)
        if self.weight is not None:
            self.weight.inc_update(callback)

    def _backward(self, input: Arg, dout: Any) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{self.label}({self.in_width} -> {self.out_width})"


# -- matrices -------------------------------------------------------------------------------------
class FullMatrixProjection(Projection):
    """``out += x W^T``: a fully connected map without bias.

    Args:
        in_width: input columns.
        out_width: output columns.
        init, dtype, weight: see :class:`Projection`.

    Shape:
        - Input: ``(N, in_width)`` (or ``(N, *)`` with that many elements per sample).
        - Output: ``(N, out_width)``.

    Attributes:
        weight: ``(out_width, in_width)`` (PyTorch's Linear layout).
    """

    transposed = False

    def __init__(
        self,
        in_width: int,
        out_width: int,
        *,
        init: str | Initializer = "msra",
        dtype: Any = np.float32,
        weight: Parameter | None = None,
    ) -> None:
        shape = (in_width, out_width) if self.transposed else (out_width, in_width)
        super().__init__(
            in_width,
            out_width,
            weight_shape=shape,
            fan_in=in_width,
            fan_out=out_width,
            init=init,
            dtype=dtype,
            weight=weight,
        )

    def _matrix(self) -> Any:
        """The weight as ``(out, in)``, a view for the transposed layout."""
        w = self.weight.value
        return w.T if self.transposed else w

    def forward(self, input: Arg, out: Any) -> None:
        out += self._rows(input, self.in_width) @ self._matrix().T

    def _backward(self, input: Arg, dout: Any) -> None:
        dx = self._grad_rows(input)
        if dx is not None:
            dx += dout @ self._matrix()
        if self.needs_weight_grad:
            g = dout.T @ self._rows(input, self.in_width)
            self.weight.grad += g.T if self.transposed else g


class TransposedFullMatrixProjection(FullMatrixProjection):
    """``out += x W`` with the weight stored ``(in_width, out_width)``.

    Paddle's ``TransposedFullMatrixProjection``; useful to tie a weight with a table projection
    (a ``(vocab, width)`` table read as an output matrix). Arguments as
    :class:`FullMatrixProjection`.

    Attributes:
        weight: ``(in_width, out_width)``.
    """

    transposed = True


class TableProjection(Projection):
    """Embedding lookup: ``out[i] += W[ids[i]]``; only the looked-up rows get a gradient.

    Args:
        vocab_size: rows of the table; ids must lie in ``[0, vocab_size)``.
        width: columns of each row (the output width).
        init: initialiser (standard normal by default, as ``torch.nn.Embedding``).
        dtype, weight: see :class:`Projection`.

    Shape:
        - Input: an Arg whose ``ids`` (or integer ``value``) holds ``N`` ids.
        - Output: ``(N, width)``.

    Attributes:
        weight: ``(vocab_size, width)``.
    """

    def __init__(
        self,
        vocab_size: int,
        width: int,
        *,
        init: str | Initializer = unit_normal,
        dtype: Any = np.float32,
        weight: Parameter | None = None,
    ) -> None:
        if vocab_size < 1:
            raise self.fail(f"vocab_size={vocab_size} must be >= 1")
        super().__init__(
            None,
            width,
            weight_shape=(vocab_size, width),
            fan_in=1,
            fan_out=width,
            init=init,
            dtype=dtype,
            weight=weight,
        )
        self.vocab_size = vocab_size

    def _ids(self, input: Arg) -> Any:
        ids = input.ids if input.ids is not None else input.value
        if ids is None or ids.dtype.kind not in "iu":
            got = "nothing" if ids is None else f"dtype {ids.dtype}"
            raise self.fail(f"needs integer ids (Arg.ids), got {got}")
        ids = ids.reshape(-1)
        if len(ids):
            lo, hi = int(ids.min()), int(ids.max())
            if lo < 0 or hi >= self.vocab_size:
                raise self.fail(
                    f"ids must lie in [0, {self.vocab_size}) (the table's rows), "
                    f"got range [{lo}, {hi}]"
                )
        return ids

    def forward(self, input: Arg, out: Any) -> None:
        xp = get_array_module(self.weight.value)
        ids = xp.asarray(self._ids(input))
        out += xp.take(self.weight.value, ids, axis=0)
        self._ids_seen = ids

    def _backward(self, input: Arg, dout: Any) -> None:
        if self.needs_weight_grad:
            RowScatter(self._ids_seen).add(self.weight.grad, dout)

    def __repr__(self) -> str:
        return f"{self.label}(vocab={self.vocab_size}, width={self.out_width})"


# -- element-wise ---------------------------------------------------------------------------------
class DotMulProjection(Projection):
    """``out += x * w`` with one weight per column.

    Args:
        width: input and output columns.
        init: initialiser (ones by default: the projection starts as the identity).
        dtype, weight: see :class:`Projection`.

    Shape:
        - Input and output: ``(N, width)``.

    Attributes:
        weight: ``(width,)``.
    """

    def __init__(
        self,
        width: int,
        *,
        init: str | Initializer = ones,
        dtype: Any = np.float32,
        weight: Parameter | None = None,
    ) -> None:
        super().__init__(
            width,
            width,
            weight_shape=self._shape(width),
            init=init,
            dtype=dtype,
            weight=weight,
        )

    @staticmethod
    def _shape(width: int) -> tuple[int, ...]:
        return (width,)

    def forward(self, input: Arg, out: Any) -> None:
        out += self._rows(input, self.in_width) * self.weight.value

    def _backward(self, input: Arg, dout: Any) -> None:
        dx = self._grad_rows(input)
        if dx is not None:
            dx += dout * self.weight.value
        if self.needs_weight_grad:
            # (N, width) summed to the weight's size: per column, or everything for a scalar
            g = dout * self._rows(input, self.in_width)
            self.weight.grad += g.reshape(-1, self.weight.size).sum(axis=0)


class ScalingProjection(DotMulProjection):
    """``out += w * x`` with one scalar weight; arguments as :class:`DotMulProjection`.

    Attributes:
        weight: ``(1,)``.
    """

    @staticmethod
    def _shape(width: int) -> tuple[int, ...]:
        return (1,)


# -- column selections ----------------------------------------------------------------------------
class SliceProjection(Projection):
    """Several column ranges of the input, concatenated: ``out += [x[:, s0:e0], x[:, s1:e1], ...]``.

    Ranges may overlap; the gradient of a column read twice is the sum of both reads.

    Args:
        in_width: input columns.
        slices: ``[(start, end), ...]`` with ``0 <= start < end <= in_width``.

    Shape:
        - Input: ``(N, in_width)``.
        - Output: ``(N, sum(end - start))``.
    """

    def __init__(self, in_width: int, slices: Sequence[tuple[int, int]]) -> None:
        slices = [tuple(int(v) for v in s) for s in slices]
        if not slices:
            raise self.fail("needs at least one (start, end) slice")
        for s in slices:
            if len(s) != 2 or not 0 <= s[0] < s[1] <= in_width:
                raise self.fail(
                    f"slice {s} is out of range for an input of "
                    f"{in_width} columns (need 0 <= start < end <= {in_width})"
                )
        super().__init__(in_width, sum(e - s for s, e in slices))
        self.slices = slices

    def _pairs(self) -> list[tuple[slice, slice]]:
        """(input columns, output columns) per slice."""
        pairs, at = [], 0
        for s, e in self.slices:
            pairs.append((slice(s, e), slice(at, at + e - s)))
            at += e - s
        return pairs

    def forward(self, input: Arg, out: Any) -> None:
        x = self._rows(input, self.in_width)
        for src, dst in self._pairs():
            out[:, dst] += x[:, src]

    def _backward(self, input: Arg, dout: Any) -> None:
        dx = self._grad_rows(input)
        if dx is not None:
            for src, dst in self._pairs():
                dx[:, src] += dout[:, dst]

    def __repr__(self) -> str:
        return f"{self.label}({self.in_width}, slices={self.slices})"


class IdentityProjection(SliceProjection):
    """``out += x[:, offset:offset + out_width]``: the identity, or Paddle's identity-with-offset.

    Args:
        in_width: input columns.
        out_width: columns taken (default: all from ``offset`` on).
        offset: first column taken.

    Shape:
        - Input: ``(N, in_width)``.
        - Output: ``(N, out_width)``.
    """

    def __init__(self, in_width: int, out_width: int | None = None, offset: int = 0) -> None:
        out_width = in_width - offset if out_width is None else out_width
        super().__init__(in_width, [(offset, offset + out_width)])
        self.offset = offset


# -- sequences ------------------------------------------------------------------------------------
def context_index(
    seq_starts: np.ndarray, context_start: int, context_length: int, begin_pad: int
) -> tuple[np.ndarray, np.ndarray]:
    """Where each output slot reads from, for a context window within each sequence.

    Output row ``t`` (at position ``p`` in a sequence of length ``L`` starting at row ``s``),
    slot ``j`` reads relative position ``r = p + context_start + j``: input row ``s + r`` when
    ``0 <= r < L``, else padding row ``begin_pad + r`` (before the start) or
    ``begin_pad + r - L`` (past the end), which is Paddle's ``ContextProjectionForward``.

    Returns:
        ``(index, outside)``, both ``(N, context_length)``: ``index`` into the rows of
        ``[input; padding]`` (padding row ``k`` is ``N + k``), and where the padding is read.
    """
    starts = np.asarray(seq_starts, dtype=np.int64)
    lengths = np.diff(starts)
    n = int(starts[-1])
    seq = np.repeat(np.arange(len(lengths)), lengths)
    first, length = starts[:-1][seq, None], lengths[seq, None]
    rel = (np.arange(n)[:, None] - first) + context_start + np.arange(context_length)
    before, after = rel < 0, rel >= length
    pad = np.where(before, begin_pad + rel, begin_pad + rel - length)
    outside = before | after
    return np.where(outside, n + pad, first + rel), outside


class ContextProjection(Projection):
    """A window of rows within each sequence, concatenated: Paddle's ``ContextProjection``.

    Output row ``t`` holds input rows ``t + context_start ... t + context_start +
    context_length - 1`` side by side, counting only rows of ``t``'s own sequence; slots that
    fall outside the sequence hold zeros, or trainable padding rows.

    Args:
        width: input columns ``D``.
        context_length: rows in the window.
        context_start: offset of the window's first row (may be negative); default
            ``-(context_length - 1) // 2``, a window centred on the row.
        trainable_padding: learn the rows read outside a sequence instead of using zeros.
        init: initialiser of the padding (zeros by default, as the untrained case).
        dtype, weight: see :class:`Projection`.

    Shape:
        - Input: ``(N, D)`` with ``Arg.seq_starts``.
        - Output: ``(N, context_length * D)``; slot ``j`` in columns ``j*D:(j+1)*D``.

    Attributes:
        begin_pad: ``max(0, -context_start)`` padding rows before a sequence.
        end_pad: ``max(0, context_start + context_length - 1)`` padding rows after one.
        weight: ``(begin_pad + end_pad, D)`` when ``trainable_padding`` (and non-empty), else None.
    """

    def __init__(
        self,
        width: int,
        context_length: int,
        context_start: int | None = None,
        trainable_padding: bool = False,
        *,
        init: str | Initializer = "zero",
        dtype: Any = np.float32,
        weight: Parameter | None = None,
    ) -> None:
        if context_length < 1:
            raise self.fail(f"context_length={context_length} must be >= 1")
        if context_start is None:
            context_start = -((context_length - 1) // 2)
        self.context_length, self.context_start = context_length, context_start
        self.begin_pad = max(0, -context_start)
        self.end_pad = max(0, context_start + context_length - 1)
        pad_rows = self.begin_pad + self.end_pad
        self.trainable_padding = trainable_padding
        shape = (pad_rows, width) if trainable_padding and pad_rows else None
        super().__init__(
            width,
            width * context_length,
            weight_shape=shape,
            fan_in=width,
            fan_out=width,
            init=init,
            dtype=dtype,
            weight=weight,
        )

    def _seq_starts(self, input: Arg, n: int) -> np.ndarray:
        if input.seq_starts is None:
            raise self.fail("needs a sequence input (Arg.seq_starts)")
        s = to_host(input.seq_starts).astype(np.int64).reshape(-1)
        if len(s) < 2 or s[0] != 0 or s[-1] != n or (np.diff(s) < 0).any():
            raise self.fail(
                f"seq_starts must rise from 0 to the {n} rows, got {s.tolist()[:8]}"
                + (" ..." if len(s) > 8 else "")
            )
        return s

    def forward(self, input: Arg, out: Any) -> None:
        x = self._rows(input, self.in_width)
        xp = get_array_module(x)
        n, pad_rows = x.shape[0], self.begin_pad + self.end_pad
        index, outside = context_index(
            self._seq_starts(input, n), self.context_start, self.context_length, self.begin_pad
        )
        pad = (
            self.weight.value
            if self.weight is not None
            else xp.zeros((pad_rows, x.shape[1]), x.dtype)
        )
        table = xp.concatenate([x, pad.astype(x.dtype, copy=False)])
        index = xp.asarray(index.reshape(-1))
        out += table[index].reshape(n, -1)
        # zeros read outside a sequence get no gradient; learnt padding does
        keep = None if self.weight is not None else xp.asarray(~outside.reshape(-1))
        self._gather = (index, keep)

    def _backward(self, input: Arg, dout: Any) -> None:
        dx = self._grad_rows(input)
        if dx is None and not self.needs_weight_grad:
            return
        xp = get_array_module(dout)
        n, d = dout.shape[0], self.in_width
        dtable = xp.zeros((n + self.begin_pad + self.end_pad, d), dtype=dout.dtype)
        RowScatter(*self._gather).add(dtable, dout.reshape(-1, d))
        if dx is not None:
            dx += dtable[:n]
        if self.needs_weight_grad:
            self.weight.grad += dtable[n:]

    def __repr__(self) -> str:
        return (
            f"{self.label}({self.in_width}, length={self.context_length}, "
            f"start={self.context_start}, trainable_padding={self.trainable_padding})"
        )


# -- convolutions ---------------------------------------------------------------------------------
class ConvProjection(Projection):
    """Convolution of flattened images: Paddle's ``ConvProjection``.

    Input rows are images ``(C, *input_size)`` flattened, as Paddle's projections see them; the
    output rows are the ``(O, *output_size)`` results flattened the same way, so per-channel
    (shared) bias in the owning layer sees channel-major columns.

    Args:
        in_channels: ``C``.
        out_channels: ``O``.
        input_size: spatial size of one input image (an int for a square 2-D image).
        kernel_size, stride, padding, dilation: an int, or one value per spatial axis.
        groups: independent channel groups.
        output_padding: (transposed only) extra size on one side of the output.
        init, dtype, weight: see :class:`Projection`.

    Shape:
        - Input: ``(N, C * prod(input_size))``.
        - Output: ``(N, O * prod(output_size))`` with, per axis,
          ``out = (in + 2p - d(k-1) - 1) // s + 1`` (convolution) or
          ``out = (in - 1)s - 2p + d(k-1) + output_padding + 1`` (transposed).

    Attributes:
        weight: ``(O, C/groups, *k)``, or ``(C, O/groups, *k)`` when transposed.
        output_size: spatial size of one output image.
    """

    transposed = False

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
        *,
        output_padding: IntOrTuple = 0,
        init: str | Initializer = "msra",
        dtype: Any = np.float32,
        weight: Parameter | None = None,
    ) -> None:
        nd = 2 if isinstance(input_size, int) else len(input_size)
        self.input_size = as_tuple(input_size, nd, "input_size")
        self.geom = ConvGeometry.make(nd, kernel_size, stride, padding, dilation, groups)
        for what, c in (("in_channels", in_channels), ("out_channels", out_channels)):
            if c < 1 or c % groups:
                raise self.fail(f"{what}={c} must be a positive multiple of {groups=}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.output_padding = as_tuple(output_padding, nd, "output_padding")
        try:
            self.geom.check_output_padding(self.output_padding, self.transposed)
        except ValueError as exc:
            raise self.fail(str(exc)) from None
        if self.transposed:
            self.output_size = self.geom.transpose_out_size(self.input_size, self.output_padding)
        else:
            self.output_size = self.geom.out_size(self.input_size)
        if min(self.output_size) < 1:
            raise self.fail(
                f"kernel {self.geom.ksize} (dilation {self.geom.dilation}) is larger "
                f"than the input {self.input_size} padded by {self.geom.pad}"
            )
        g, k = self.geom.groups, self.geom.ksize
        if self.transposed:
            shape = (in_channels, out_channels // g, *k)
        else:
            shape = (out_channels, in_channels // g, *k)
        super().__init__(
            in_channels * int(np.prod(self.input_size)),
            out_channels * int(np.prod(self.output_size)),
            weight_shape=shape,
            fan_in=shape[1] * self.geom.kernel_volume,
            fan_out=shape[0] * self.geom.kernel_volume,
            init=init,
            dtype=dtype,
            weight=weight,
        )

    def _images(self, input: Arg) -> Any:
        x = self._rows(input, self.in_width)
        return x.reshape(x.shape[0], self.in_channels, *self.input_size)

    def forward(self, input: Arg, out: Any) -> None:
        x = self._images(input)
        y = conv_any_forward(x, self.weight.value, self.geom, self.transposed, self.output_size)
        out += y.reshape(out.shape)

    def _backward(self, input: Arg, dout: Any) -> None:
        dx_buf = self._grad_rows(input)
        need_dw = self.needs_weight_grad
        if dx_buf is None and not need_dw:
            return
        x = self._images(input)
        dy = dout.reshape(dout.shape[0], self.out_channels, *self.output_size)
        dx, dw = conv_any_backward(
            dy, x, self.weight.value, self.geom, self.transposed, dx_buf is not None, need_dw
        )
        if dx is not None:
            dx_buf += dx.reshape(dx_buf.shape)
        if dw is not None:
            self.weight.grad += dw

    def __repr__(self) -> str:
        g = self.geom
        return (
            f"{self.label}({self.in_channels}, {self.out_channels}, input={self.input_size}, "
            f"kernel={g.ksize}, stride={g.stride}, pad={g.pad}, dilation={g.dilation}, "
            f"groups={g.groups})"
        )


class ConvTransposeProjection(ConvProjection):
    """Transposed convolution of flattened images (Paddle's ``ConvTransProjection``).

    Arguments and shapes as :class:`ConvProjection` with the transposed formula; the weight is
    ``(C, O/groups, *k)``.
    """

    transposed = True
