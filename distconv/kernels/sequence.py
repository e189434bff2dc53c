"""Sequence offsets turned into per-row facts with array operations, on numpy and cupy alike.

A sequence batch is rows plus ``seq_starts`` (``n_seqs + 1`` row offsets). Nothing here loops
over sequences or copies offsets to the host: every function is a few array operations in the
offsets' own array module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.backend import get_array_module, is_gpu_array


def segment_ids(starts: Any, total: int) -> Any:
    """The segment each of ``total`` rows belongs to, given ``n + 1`` offsets.

    ``segment_ids([0, 2, 2, 5], 5) == [0, 0, 2, 2, 2]``: empty segments own no row. A binary
    search rather than ``repeat(arange(n), lengths)``, because cupy's ``repeat`` wants the
    lengths on the host. Also how CSR selections are expanded row by row.
    """
    xp = get_array_module(starts)
    return xp.searchsorted(starts, xp.arange(total), side="right") - 1


def check_offsets(starts: Any, rows: int, xp: Any = np, what: str = "seq_starts") -> Any:
    """``starts`` as an int array (of module ``xp``) of offsets into ``rows`` rows.

    Args:
        starts: the offsets (host or device).
        rows: the row count they must end at.
        xp: the array module to return them in.
        what: how error messages name them (``"input 0's seq_starts"``).

    Raises:
        ValueError: the offsets are not 1-D integers that begin at 0, end at ``rows`` and
            never decrease.
    """
    if starts is None:
        raise ValueError(f"{what} are missing; a sequence input needs them (fit: a SequenceSet)")
    # check where the offsets already are: host offsets (the usual case, from a data loader)
    # cost the device nothing, and device offsets are read back once, as one flag
    starts = get_array_module(starts).asarray(starts)
    if starts.ndim != 1 or len(starts) < 1 or starts.dtype.kind not in "iu":
        raise ValueError(
            f"{what} must be a 1-D integer array of n + 1 offsets, got "
            f"shape {tuple(starts.shape)} dtype {starts.dtype}"
        )
    # one width for everyone: callers add and index with the offsets, which narrow or unsigned
    # ones would wrap or turn into floats
    starts = starts.astype(np.int64, copy=False)
    bad = (starts[0] != 0) | (starts[-1] != rows) | (starts[1:] < starts[:-1]).any()
    if bool(bad):
        raise ValueError(f"{what} must rise from 0 to the row count {rows}, got {_preview(starts)}")
    return xp.asarray(starts)


def _preview(a: Any, n: int = 8) -> str:
    """A short text form of an index array for error messages."""
    head = [int(v) for v in a[:n].tolist()]
    return f"{head}{' ...' if len(a) > n else ''} (length {len(a)})"


def context_index(
    seq_starts: Any, rows: int, context_start: int, context_length: int, begin_pad: int
) -> tuple[Any, Any]:
    """Where each output slot reads from, for a context window within each sequence.

    Output row ``t`` (at position ``p`` in a sequence of length ``L`` starting at row ``s``),
    slot ``j`` reads relative position ``r = p + context_start + j``: input row ``s + r`` when
    ``0 <= r < L``, else padding row ``begin_pad + r`` (before the start) or
    ``begin_pad + r - L`` (past the end), which is Paddle's ``ContextProjectionForward``.

    Args:
        seq_starts: ``n_seqs + 1`` checked offsets (numpy or cupy; the result is on the same).
        rows: the row count, ``seq_starts[-1]`` (passed in, so nothing is read back).
        context_start, context_length: the window.
        begin_pad: padding rows before a sequence.

    Returns:
        ``(index, outside)``, both ``(rows, context_length)``: ``index`` into the rows of
        ``[input; padding]`` (padding row ``k`` is ``rows + k``), and where padding is read.
    """
    xp = get_array_module(seq_starts)
    seq = segment_ids(seq_starts, rows)
    first = seq_starts[seq][:, None]
    length = seq_starts[seq + 1][:, None] - first
    rel = (xp.arange(rows)[:, None] - first) + (context_start + xp.arange(context_length))
    before, after = rel < 0, rel >= length
    pad = xp.where(before, begin_pad + rel, begin_pad + rel - length)
    outside = before | after
    return xp.where(outside, rows + pad, first + rel), outside


def segment_argmax(values: Any, seg: Any, n: int) -> Any:
    """Per segment and column, the row holding the segment's greatest value, the first of equal
    ones (Paddle's ``MaxLayer`` keeps the first: it replaces its maximum only on ``>``).

    Args:
        values: ``(rows, width)`` floats.
        seg: ``(rows,)`` segment of each row (:func:`segment_ids`), non-decreasing.
        n: the number of segments.

    Returns:
        ``(n, width)`` int64 rows; ``rows`` (no row) for an empty segment. A NaN is greater than
        every number (the first NaN wins, as numpy's ``argmax``); ``-0.0`` equals ``0.0``.
    """
    if is_gpu_array(values):
        return _argmax_by_keys(values, seg, n)
    return _argmax_by_reduceat(values, seg, n)


def _argmax_by_reduceat(values: Any, seg: Any, n: int) -> Any:
    """:func:`segment_argmax` on the host: each segment's maximum by ``maximum.reduceat``, then
    the first row equal to it, found among the few rows that are. Exact, as the keys' path (a
    comparison rounds nothing), and faster on numpy; cupy has no ``maximum.reduceat``."""
    rows, width = values.shape
    first = np.full((n, width), rows, dtype=np.int64)
    if not rows or not width:
        return first
    starts = np.ones(rows, dtype=bool)  # the first row of each segment that has rows
    starts[1:] = seg[1:] != seg[:-1]
    top = np.maximum.reduceat(values, np.flatnonzero(starts), axis=0)  # a NaN wins
    nan = bool(np.isnan(top).any())
    top = top[np.cumsum(starts) - 1]  # each row its segment's maximum
    hit = values == top  # -0.0 == 0.0
    if nan:
        hit |= np.isnan(values) & np.isnan(top)
    # one row per column and segment, more where several tie; the flat positions split by
    # hand: 2-D nonzero took half of the whole argmax
    r, c = np.divmod(np.flatnonzero(hit), width)
    np.minimum.at(first.reshape(-1), seg[r] * width + c, r)  # numpy's fast 1-D ufunc.at
    return first


def _argmax_by_keys(values: Any, seg: Any, n: int) -> Any:
    """:func:`segment_argmax` on the device: integer keys of the floats, scattered."""
    xp = get_array_module(values)
    rows = len(values)
    keys = _order_keys(values)
    # two scatters of unsigned integers, which numpy and cupy both reduce exactly: cupy's
    # maximum.at on float64 compares through fmaxf, in float32, and drops NaN; and cupy before
    # 14.1 takes no int64 in maximum.at or minimum.at (uint32 and uint64 it takes from 13)
    top = xp.zeros((n, values.shape[1]), dtype=keys.dtype)
    xp.maximum.at(top, seg, keys)
    none = np.uint64(rows)
    row = xp.arange(rows, dtype=np.uint64)[:, None]
    won = xp.where(keys == top[seg], row, none)
    first = xp.full((n, values.shape[1]), none, dtype=np.uint64)
    xp.minimum.at(first, seg, won)
    return first.view(np.int64)  # row numbers, all below 2**63: the same bits


def _order_keys(values: Any) -> Any:
    """Unsigned integer keys in the order of the float ``values``: equal values, equal keys;
    uint64 for float64, uint32 for narrower floats (cupy's ``maximum.at`` takes no 16-bit
    integers).

    An IEEE float's bits read as a signed integer rise with the value for positive floats and
    fall for negative ones; flipping every bit but the sign of the negative ones makes them
    rise too, and flipping the sign bit of that signed order makes it an unsigned one. NaNs
    become one positive NaN (the greatest key) and ``-0.0`` becomes ``0.0``.
    """
    xp = get_array_module(values)
    dtype = values.dtype
    canonical = xp.where(xp.isnan(values), dtype.type(np.nan), values + dtype.type(0))
    wide = np.dtype(np.int64 if dtype.itemsize > 4 else np.int32)
    bits = canonical.view(np.dtype(f"i{dtype.itemsize}")).astype(wide, copy=False)
    low = wide.type(2 ** (8 * dtype.itemsize - 1) - 1)  # every bit of the float but its sign
    signed = bits ^ ((bits >> (8 * wide.itemsize - 1)) & low)
    unsigned = np.dtype(f"u{wide.itemsize}")
    return signed.view(unsigned) ^ unsigned.type(2 ** (8 * wide.itemsize - 1))
