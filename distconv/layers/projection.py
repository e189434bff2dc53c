"""Projections that map rows: full matrices, embedding tables, element-wise weights, slices.

See :mod:`distconv.layers.part` for what every projection does; these add into a
:class:`~distconv.layers.mixed.Mixed` or :class:`~distconv.layers.concat.Concatenate2` output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module
from distconv.init import Initializer, ones, unit_normal
from distconv.kernels.bias import row_sums
from distconv.kernels.parallel import matmul
from distconv.kernels.rows import RowScatter
from distconv.kernels.shape import is_int
from distconv.layers.base import size_arg
from distconv.layers.part import Projection, WeightSpec
from distconv.layers.written_rows import note_rows
from distconv.parameter import Parameter


# -- matrices -------------------------------------------------------------------------------------
class FullMatrixProjection(Projection):
    """``out += x W^T``: a fully connected map without bias.

    Its ``(out_width, in_width)`` weight is also an embedding table's ``(vocab, width)``
    layout, so an output projection onto a vocabulary shares the weight of the
    :class:`TableProjection` that embeds it: ``FullMatrixProjection(width, vocab,
    weight=table.weight)`` (tied embeddings, as PyTorch ties ``Linear`` and ``Embedding``),
    once ``table``'s layer is built: its weight is made when a layer adopts it.

    Args:
        in_width: input columns.
        out_width: output columns.
        init, dtype, weight: see :class:`~distconv.layers.part.Projection`.

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
        fans = (in_width, out_width)
        super().__init__(in_width, out_width, WeightSpec(shape, fans, init, dtype, weight))

    def _matrix(self) -> Any:
        """The weight as ``(out, in)``, a view for the transposed layout."""
        w = self.weight.value
        return w.T if self.transposed else w

    def forward(self, input: Arg, out: Any) -> None:
        out += matmul(self._rows(input, self.in_width), self._matrix().T)

    def _backward(self, input: Arg, dout: Any) -> None:
        dx = self._grad_rows(input)
        if dx is not None:
            dx += matmul(dout, self._matrix())
        if self.needs_weight_grad:
            g = matmul(dout.T, self._rows(input, self.in_width))
            self.weight.grad += g.T if self.transposed else g


class TransposedFullMatrixProjection(FullMatrixProjection):
    """``out += x W`` with the weight stored ``(in_width, out_width)``.

    Paddle's ``TransposedFullMatrixProjection``. Paddle stores a full matrix ``(in, out)``, so
    there the transposed one has a table's layout; our layouts are PyTorch's, the other way
    round: a table ties with :class:`FullMatrixProjection`, and this one ties with a
    :class:`FullMatrixProjection` running the opposite way (``TransposedFullMatrixProjection(a,
    b)`` and ``FullMatrixProjection(b, a)`` both hold an ``(a, b)`` weight: a tied encoder and
    decoder). Arguments as :class:`FullMatrixProjection`.

    Attributes:
        weight: ``(in_width, out_width)``.
    """

    transposed = True


class TableProjection(Projection):
    """Embedding lookup: ``out[i] += W[ids[i]]``; only the looked-up rows get a gradient.

    Id ``-1`` is "no row", as in Paddle's ``selectRows`` / ``addToRows``: its output row gets
    nothing added and it gives no gradient, which is how padded id sequences work.

    Args:
        vocab_size: rows of the table; ids must lie in ``[0, vocab_size)``, or be ``-1``.
        width: columns of each row (the output width).
        init: initialiser (standard normal by default, as ``torch.nn.Embedding``).
        dtype, weight: see :class:`Projection`.
        sparse: mark the weight ``sparse_rows`` (Paddle's ``sparse_update``): a parameter
            server then moves only the rows of the ids in each batch. A shared weight marked
            elsewhere stays marked.

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
        sparse: bool = False,
    ) -> None:
        vocab_size = size_arg(self, "vocab_size", vocab_size)
        spec = WeightSpec((vocab_size, width), (1, width), init, dtype, weight)
        super().__init__(None, width, spec)
        self.vocab_size = vocab_size
        self.sparse = bool(sparse)

    def _make_params(self) -> None:
        super()._make_params()
        if self.sparse:
            self.weight.mark_sparse_rows()

    def rows_read(self, input: Arg | None) -> Any:
        """The distinct ids of ``input`` (``-1``, no row, left out): the rows forward reads."""
        if input is None:
            raise self.fail(
                "its ids come from another layer, so the rows of its sparse weight are unknown "
                "before forward; feed the ids directly (or build it without sparse=True)"
            )
        ids = self._ids(input)
        return get_array_module(ids).unique(ids[ids >= 0])

    def id_range(self) -> tuple[int, int]:
        """The ids it reads: the table's rows, or -1 (no row) (:meth:`Projection.id_range`)."""
        return -1, self.vocab_size

    def _ids(self, input: Arg) -> Any:
        ids = input.ids if input.ids is not None else input.value
        if ids is None or ids.dtype.kind not in "iu":
            got = "nothing" if ids is None else f"dtype {ids.dtype}"
            raise self.fail(f"needs integer ids (Arg.ids), got {got}")
        ids = get_array_module(self.weight.value).asarray(ids.reshape(-1))
        if len(ids):
            lo, hi = int(ids.min()), int(ids.max())
            if lo < -1 or hi >= self.vocab_size:
                raise self.fail(
                    f"ids must lie in [0, {self.vocab_size}) (the table's rows), or be -1 "
                    f"(no row), got range [{lo}, {hi}]"
                )
        return ids

    def forward(self, input: Arg, out: Any) -> None:
        xp = get_array_module(self.weight.value)
        ids = self._ids(input)
        if len(ids) != out.shape[0]:  # ids of shape (N, k): N rows, N * k ids
            given = input.ids if input.ids is not None else input.value
            raise self.fail(
                f"needs one id per row: got ids of shape {tuple(given.shape)} for "
                f"{out.shape[0]} rows"
            )
        found = ids >= 0
        rows = xp.take(self.weight.value, xp.where(found, ids, 0), axis=0)
        out += xp.where(found[:, None], rows, 0)  # id -1 reads no row
        self._ids_seen = (ids, found)

    def _backward(self, input: Arg, dout: Any) -> None:
        if self.needs_weight_grad:
            ids, found = self._ids_seen
            RowScatter(ids, found).add(self.weight.grad, dout)
            note_rows(self.weight, ids)  # the rows just written (-1 none), for a sparse push

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
        super().__init__(width, width, WeightSpec(self._shape(width), (1, 1), init, dtype, weight))

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
            self.weight.grad += row_sums(g.reshape(-1, self.weight.size))


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
        if not all(isinstance(s, Sequence) and all(is_int(v) for v in s) for s in slices):
            raise self.fail(f"slices must be (start, end) pairs of ints, got {slices!r}")
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
