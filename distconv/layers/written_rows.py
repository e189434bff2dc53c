"""The rows of a ``sparse_rows`` gradient a layer's backward wrote, said by the layer itself.

A parameter server pushes a sparse table's gradient by rows, and refuses a row with a gradient
that was not prefetched (a layer wrote rows its ``rows_read`` missed: the update would be lost).
Finding those rows by scanning the whole gradient costs a full read of the table each step (and,
on a GPU, a reduction over all of it; docs/benchmarks.md times it). A layer that adds into a
gradient by an index array says which rows with :func:`note_rows`, from the very array it wrote
with, so what it says is what it wrote; the sync then checks those rows against the prefetched
ones and copies only them. ``SelectiveFullyConnected`` and ``TableProjection`` note theirs.

What is noted is trusted only where it covers every write: each user of the parameter in
each pass of the step noted its rows before its ``inc_update`` (:func:`take_rows` returns
None otherwise, and the sync scans as before). A layer of one's own that writes without
noting leaves the scan in place for that parameter, shared or not. One that notes fewer rows
than it writes is not caught by the push: a row it left out that the step did not prefetch
(its ``rows_read`` missed it too, or it was prefetched before the step) is neither refused
nor pushed nor cleared, so its update is lost to the step and its gradient joins a later
one's. ``DISTCONV_CHECK_SPARSE_ROWS=1`` reads the whole gradient as well and refuses a row
holding one that no layer noted, naming it.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from distconv.backend import get_array_module, to_host
from distconv.parameter import Parameter


class _Noted:
    """One parameter's rows noted since the last take, and whether each pass's users all
    noted (``passes_whole``), counted by ``in_pass``."""

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.in_pass = 0
        self.passes_whole = True


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
    noted = _noted.get(param)
    if noted is None:  # no step of a sync that reads it is open: nothing to keep
        return
    users_in = param.users_in  # users of this pass already in: a new pass starts at 0
    if users_in == 0:
        noted.passes_whole &= noted.in_pass in (0, param.shared_count or 1)
        noted.in_pass = 0
    # a user that wrote without noting came in before this one: the pass is not whole
    noted.passes_whole &= users_in == noted.in_pass
    noted.in_pass += 1
    noted.rows.append(rows if isinstance(rows, slice) else get_array_module(rows).array(rows))


def take_rows(param: Parameter) -> np.ndarray | None:
    """The sorted distinct rows (int64, on the host) noted for ``param`` since the last take,
    or None where some write of it was not noted (or none was): the caller then reads the
    gradient itself. Called where the gradient fired for the last time in the step (every
    user of its last pass is in); forgets what it read.

    Raises:
        ValueError: a row noted past the parameter's rows (a layer's bug).
    """
    noted = _noted.pop(param, None)
    if noted is None or not noted.rows:
        return None
    if not noted.passes_whole or noted.in_pass != (param.shared_count or 1):
        return None
    count = param.shape[0]
    if any(isinstance(r, slice) and r == EVERY_ROW for r in noted.rows):
        return np.arange(count, dtype=np.int64)
    ids = [np.arange(*r.indices(count)) if isinstance(r, slice) else to_host(r) for r in noted.rows]
    ids = np.unique(np.concatenate([np.asarray(r, np.int64).ravel() for r in ids]))
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
    _noted[param] = _Noted()


def close_rows(param: Parameter) -> None:
    """Stop keeping what is noted for ``param`` (the step ended without taking it: an abandoned
    step's, or one whose push failed before it), so a backward outside any step keeps nothing."""
    _noted.pop(param, None)
