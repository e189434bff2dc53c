"""The rows of a ``sparse_rows`` gradient a layer's backward wrote, said by the layer itself.

For a layer's author: a backward that adds into a sparse table by an index array may call
``note_rows(table, ids)`` with exactly the ids it added into, before ``table.inc_update``; or
never. Notes that leave a written row out lose that row's update on a parameter server; the
gradient checks (:mod:`distconv.gradient_check`) and ``DISTCONV_CHECK_SPARSE_ROWS=1`` find them.

A parameter server pushes a sparse table's gradient by rows, and refuses a row with a gradient
that was not prefetched (a layer wrote rows its ``rows_read`` missed: the update would be lost).
Finding those rows by scanning the whole gradient costs a full read of the table each step (and,
on a GPU, a reduction over all of it; docs/benchmarks.md times it). A layer that adds into a
gradient by an index array says which rows with :func:`note_rows`, from the very array it wrote
with, so what it says is what it wrote; the sync then checks those rows against the prefetched
ones and copies only them. ``SelectiveFullyConnected`` and ``TableProjection`` note theirs.

What is noted is trusted only where it covers every write: each user of the parameter in
each pass of the step noted its rows before its ``inc_update`` (:func:`take_rows` returns
None otherwise, a pass with no note at all included, and the sync scans as before). A layer
of one's own that writes without noting leaves the scan in place for that parameter, shared or
not. One that notes fewer rows than it writes is not caught by the push: a row it left out
that the step did not prefetch (its ``rows_read`` missed it too, or it was prefetched before
the step) is not pushed and not cleared. The Trainer refuses it after the first step and at
each epoch's end (the gradient left, named); in between its update is lost to its step and its
gradient joins a later step's. :data:`CHECK_ROWS_VARIABLE` reads the whole gradient as well and
refuses a row holding one that no layer noted, naming it, under a parameter server and under
``LocalSync`` (not ``MPISync``).
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from distconv.backend import get_array_module, to_host
from distconv.parameter import Parameter

#: set (to anything but an off value), a sync reads the whole gradient of a table whose
#: writes were all noted too, and refuses a row holding one that no layer noted: a check of
#: those layers, which changes no number
CHECK_ROWS_VARIABLE = "DISTCONV_CHECK_SPARSE_ROWS"


class _Noted:
    """One parameter's rows noted since the last take: ``first`` is the pass the notes
    began in (:attr:`Parameter.passes` at :func:`open_rows`), ``by_pass`` how many users noted
    in each pass, and ``whole`` whether each did so in its turn (none had written unnoted)."""

    def __init__(self, first: int) -> None:
        self.rows: list[Any] = []
        self.first = first
        self.by_pass: dict[int, int] = {}
        self.whole = True

    def covers(self, last: int, users: int) -> bool:
        """Whether every pass from the first to ``last`` (excluded) had its ``users`` note."""
        return self.whole and all(self.by_pass.get(k) == users for k in range(self.first, last))


_noted: weakref.WeakKeyDictionary[Parameter, _Noted] = weakref.WeakKeyDictionary()


#: what :func:`note_rows` takes for every row of the parameter (a full product's write)
EVERY_ROW = slice(None)


def note_rows(param: Parameter, rows: Any) -> None:
    """Say that this backward added into ``param.grad`` in ``rows`` and nowhere else: ids on
    any device, any order, repeats allowed, negative ones (a table's ``-1``, no row) left out;
    a slice of the rows; or :data:`EVERY_ROW`. Call it before the layer's ``param.inc_update``
    (after the write, or before it). Kept only between a sync's :func:`open_rows` and its
    :func:`take_rows` (a parameter server's step), so a process training otherwise keeps
    nothing; kept as a copy on the ids' device, read at the take: a later pass of the step may
    refill the array the ids came from (a loop's own id buffer, which a table's ids are a view
    of)."""
    if not isinstance(rows, slice):
        _refuse_not_ids(param, rows)
    noted = _noted.get(param)
    if noted is None:  # no step of a sync that reads it is open: nothing to keep
        return
    in_pass = noted.by_pass.get(param.passes, 0)
    # a user that wrote without noting came in before this one: the pass is not whole
    noted.whole &= param.users_in == in_pass
    noted.by_pass[param.passes] = in_pass + 1
    noted.rows.append(rows if isinstance(rows, slice) else get_array_module(rows).array(rows))


def take_rows(param: Parameter) -> np.ndarray | None:
    """The sorted distinct rows (int64, on the host) noted for ``param`` since the last take,
    or None where some write of it was not noted (a user of a pass, or a whole pass, wrote
    without noting; or none noted): the caller then reads the gradient itself. Called where
    the gradient fired for the last time in the step (every user of its last pass is in);
    forgets what it read.

    Raises:
        ValueError: a row noted past the parameter's rows (a layer's bug).
    """
    noted = _noted.pop(param, None)
    if noted is None or not noted.rows:
        return None
    if not noted.covers(param.passes, param.shared_count or 1):
        return None
    count = param.shape[0]
    if any(isinstance(r, slice) and r == EVERY_ROW for r in noted.rows):
        return np.arange(count, dtype=np.int64)
    rows = noted.rows
    parts = [np.arange(*r.indices(count)) if isinstance(r, slice) else to_host(r) for r in rows]
    ids = np.unique(np.concatenate([np.asarray(r, np.int64).ravel() for r in parts]))
    ids = ids[np.searchsorted(ids, 0) :]  # sorted: the negative ones (no row) first
    if len(ids) and ids[-1] >= count:  # else the push's refusal named rows the table lacks
        raise ValueError(
            f"{param.name}: a layer noted writing rows up to {ids[-1]}, past its {count} rows: "
            "note_rows takes the ids its backward added into, not others"
        )
    return ids


def open_rows(param: Parameter) -> None:
    """Start keeping what is noted for ``param``, afresh (a step starts: what a backward
    outside it noted, an abandoned step's, says nothing of this step's gradient)."""
    _noted[param] = _Noted(param.passes)


def close_rows(param: Parameter) -> None:
    """Stop keeping what is noted for ``param`` (the step ended without taking it: an abandoned
    step's, or one whose push failed before it), so a backward outside any step keeps nothing."""
    _noted.pop(param, None)


def _refuse_not_ids(param: Parameter, rows: Any) -> None:
    """TypeError unless ``rows`` holds integer ids (or none): a mask of rows was taken as the
    ids 0 and 1, and float ids were truncated, so other rows than those written were noted."""
    if not hasattr(rows, "dtype"):  # a list (an array on any device keeps its own)
        rows = np.asarray(rows)
    if rows.dtype.kind not in "iu" and rows.size:  # no ids at all are no row
        raise TypeError(
            f"note_rows({param.name}): the rows must be integer ids, got an array of {rows.dtype}: "
            "pass the ids the backward added into (np.flatnonzero(mask) for a mask)"
        )


def not_noted(name: str, left_out: np.ndarray) -> str:
    """Why a gradient of sparse table ``name`` in rows ``left_out``, which the layers that
    noted their writes did not note, is refused under :data:`CHECK_ROWS_VARIABLE`."""
    ids, count = left_out[:8].tolist(), len(left_out)
    return (
        f"{name}: rows {ids} have gradients that no layer noted writing ({count} in all; "
        f"{CHECK_ROWS_VARIABLE} is set): a layer adds into rows it does not pass to note_rows, "
        "and without the check a parameter server trusts the notes: their gradient is pushed "
        "only where this step prefetched them, else held back unpushed; pass note_rows "
        "(distconv.layers.written_rows) every row its backward writes, or none (the table is "
        "then read whole)"
    )


def rows_holding(grad: Any) -> np.ndarray:
    """The sorted rows (int64, host) of ``grad`` (rows on axis 0, on its device) holding a
    nonzero: the rows a backward wrote, found by a whole read of the table."""
    xp = get_array_module(grad)
    # the row width named, not -1: a table of no rows (or rows of no elements) has none to infer
    rows = grad.reshape(grad.shape[0], math.prod(grad.shape[1:]))
    return to_host(xp.flatnonzero(rows.any(axis=1))).astype(np.int64)


def unnoted_rows(grad: Any, noted: np.ndarray) -> np.ndarray:
    """The sorted rows (int64, host) of ``grad`` holding a nonzero that ``noted``
    (:func:`take_rows`'s) leaves out (:func:`rows_holding`)."""
    return np.setdiff1d(rows_holding(grad), noted, assume_unique=True)
