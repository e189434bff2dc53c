"""Arg: what flows between layers."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from distconv.backend import all_finite, get_array_module, is_float_dtype, to_device


class Arg:
    """A layer's output as the next layer sees it, like Paddle's ``Argument``.

    Args:
        value: the array (batch first: NCHW, NCDHW, or rows of a sequence batch).
        seq_starts: for sequence batches, int array of ``n_seqs + 1`` row offsets
            (``seq_starts[0] == 0``, ``seq_starts[-1] == len(value)``).
        ids: integer ids (labels, table lookups, multiplex choices), one per row.
        needs_grad: whether layers should compute a gradient for this input. Data and ids
            don't; layer outputs do.

    The gradient buffer is allocated with zeros on first use of :attr:`grad`, so layers can always
    add (``+=``) into it; :attr:`has_grad` tells whether anything has been added yet.
    """

    __slots__ = ("value", "seq_starts", "ids", "needs_grad", "_grad")

    def __init__(
        self,
        value: Any = None,
        *,
        seq_starts: Any = None,
        ids: Any = None,
        needs_grad: bool = True,
    ) -> None:
        self.value = value
        self.seq_starts = seq_starts
        # a list of ids ([3, 1]) is read as the array it stands for; layers read .dtype, .ndim
        self.ids = ids if ids is None or hasattr(ids, "dtype") else _id_array(ids)
        self.needs_grad = needs_grad and value is not None
        self._grad = None

    @property
    def grad(self) -> Any:
        """The gradient of the loss with respect to :attr:`value`; zeros on first use.

        Raises:
            AttributeError: the Arg holds no value (ids only): there is nothing to take a
                gradient of (``zeros_like(None)`` was a 0-d object array, and ``has_grad``
                turned True).
        """
        if self._grad is None:
            self._refuse_no_value("gradient", "ids take none")
            self._grad = get_array_module(self.value).zeros_like(self.value)
        return self._grad

    @grad.setter
    def grad(self, g: Any) -> None:
        # Checked here, where a gradient set by hand is set, so that the error points at that
        # line rather than at a broadcast deep in some layer's backward.
        # A number stands for the gradient of a 0-d value (a loss): ``loss.grad = 1.0``.
        if (
            g is not None
            and self.value is not None
            and getattr(g, "shape", None) != self.value.shape
            and not (self.value.shape == () and _is_number(g))
        ):
            got = f"shape {tuple(g.shape)}" if hasattr(g, "shape") else type(g).__name__
            raise ValueError(
                f"a gradient has its value's shape {tuple(self.value.shape)}; got {got}"
            )
        self._grad = g

    @property
    def has_grad(self) -> bool:
        return self._grad is not None

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of :attr:`value`.

        Raises:
            AttributeError: the Arg holds no value (ids only); its ids' is ``ids.shape``.
        """
        self._refuse_no_value("shape", "the ids' is Arg.ids.shape")
        return tuple(self.value.shape)

    def _refuse_no_value(self, what: str, ids_hint: str) -> None:
        """Refuse to give ``what`` of :attr:`value` when there is none, in the Arg's words
        ("'NoneType' object has no attribute 'shape'" named no Arg); ``ids_hint`` follows
        where it holds ids."""
        if self.value is not None:
            return
        if self.ids is None:
            raise AttributeError(f"this Arg holds no values: it has no {what}")
        raise AttributeError(f"this Arg holds ids, no values: it has no {what} ({ids_hint})")

    @property
    def batch_size(self) -> int:
        if self.value is not None:
            return int(self.value.shape[0])
        return int(len(self.ids))

    @property
    def num_sequences(self) -> int:
        return 0 if self.seq_starts is None else int(len(self.seq_starts) - 1)

    def __repr__(self) -> str:
        parts = [f"shape={self.shape}" if self.value is not None else "value=None"]
        if self.seq_starts is not None:
            parts.append(f"n_seqs={self.num_sequences}")
        if self.ids is not None:
            parts.append(f"ids={len(self.ids)}")
        return f"Arg({', '.join(parts)})"


def _is_number(g: Any) -> bool:
    return isinstance(g, (int, float)) and not isinstance(g, bool)


def feeds_of(arrays: Mapping[str, Any], index: Any, dtype: Any = None) -> dict[str, Arg]:
    """The rows ``index`` of each host array as a network's input, on the device and needing
    no gradient: integer and boolean arrays as ``ids``, the others as values (cast to
    ``dtype`` when one is given)."""
    feeds = {}
    for name, a in arrays.items():
        part = as_fed(a[index], dtype)
        if part.dtype.kind in "iub":
            feeds[name] = Arg(ids=to_device(part), needs_grad=False)
        else:
            feeds[name] = Arg(to_device(part), needs_grad=False)
    return feeds


#: the bytes of a data set a check of its rows reads at once: a chunk's mask, never a whole set's
NOT_FINITE_CHUNK_BYTES = 16 << 20
#: how many of the rows a check of a data set finds its message names (the first ones)
ROWS_NAMED = 5


def not_finite(
    arrays: Mapping[str, Any],
    dtype: Any = None,
    *,
    chunk_bytes: int = NOT_FINITE_CHUNK_BYTES,
    row_words: Mapping[str, Callable[[int], str]] | None = None,
) -> str | None:
    """Where the float host ``arrays`` (a data set, by feed name) hold NaN or infinity as
    :func:`feeds_of` feeds them (cast to ``dtype`` where one is given: 1e5 is infinite as
    float16), or None: the first such array, how many of its rows do, and the first few.

    A network checks each batch it is fed, naming the feed but not the rows of the data set,
    and only when a step reaches them (a test set's, after an epoch of training). Rows are
    read about ``chunk_bytes`` at a time (:func:`marked_rows`), each chunk proved finite in one
    pass without a mask (:func:`~distconv.backend.all_finite`); only a chunk that is not gets a
    mask of its rows. ``row_words``: how a feed's rows are named, where not by number alone
    (:func:`rows_named`)."""

    def not_finite_rows(rows: Any) -> Any:
        with np.errstate(over="ignore"):  # past the type's range: infinite, as fed
            part = as_fed(np.asarray(rows), dtype)
        if all_finite(part):
            return None
        return ~np.isfinite(part.reshape(len(part), -1)).all(axis=1)

    for name, a in arrays.items():
        if not is_float_dtype(a.dtype):
            continue
        count, first = marked_rows(a, not_finite_rows, chunk_bytes)
        if count:
            fed = as_fed(np.empty(0, a.dtype), dtype).dtype
            cast = f" as {fed}, the type it trains in" if fed != a.dtype else ""
            rows = rows_named(count, first, (row_words or {}).get(name, str))
            return f"{name!r} holds NaN or infinity in {count} row(s){cast}: {rows}"
    return None


def marked_rows(
    a: Any, mark: Callable[[Any], Any], chunk_bytes: int = NOT_FINITE_CHUNK_BYTES
) -> tuple[int, list[int]]:
    """How many rows of ``a`` (a data set's array, or anything read by slices of rows with a
    ``shape`` and ``dtype``) ``mark`` flags, and the first :data:`ROWS_NAMED` of them.

    Rows are read about ``chunk_bytes`` at a time (at least one row), so a memory-mapped set
    is read once and never held whole; ``mark`` takes each slice of rows as read and returns a
    boolean mask of them, or None where it flags none (a pass that makes no mask)."""
    row_bytes = a.dtype.itemsize * math.prod(a.shape[1:])
    rows_at_once = max(1, chunk_bytes // max(1, row_bytes))
    count, first = 0, []
    for start in range(0, len(a), rows_at_once):
        flags = mark(a[start : start + rows_at_once])
        if flags is None:
            continue
        rows = np.flatnonzero(flags)
        count += len(rows)
        first.extend((start + rows[: ROWS_NAMED - len(first)]).tolist())
    return count, first


def rows_named(count: int, first: list[int], words: Callable[[int], str] = str) -> str:
    """The ``first`` rows of ``count`` a check found, as its message names them: ``"row 5"``,
    ``"rows 3, 9 ..."`` (more than those named), each by ``words`` (its number; a sequence
    set's row also by its sequence).

    Labelled, as a message ends with them after a range ("its ids lie in [0, 100]: 5" read
    as one more value, not as the row that holds it)."""
    label = "row" if len(first) == 1 and count == 1 else "rows"
    return f"{label} " + ", ".join(map(words, first)) + (" ..." if count > len(first) else "")


#: (id of a read-only host array, the dtype it is fed as) -> a weak reference to the array, and
#: its shape and dtype, when :func:`not_finite_once` proved it finite: a memory-mapped set was
#: read whole on every rank at every ``fit``. The reference's callback drops the entry with the
#: array.
_PROVED_FINITE: dict[tuple[int, str], tuple[weakref.ref[Any], tuple[int, ...], Any]] = {}


def not_finite_once(
    arrays: Mapping[str, Any],
    dtype: Any = None,
    row_words: Mapping[str, Callable[[int], str]] | None = None,
) -> str | None:
    """:func:`not_finite`, skipping each read-only array (``np.load(..., mmap_mode="r")``)
    that an earlier call proved finite as fed in ``dtype``: the same object (not another one at
    its address), of the same shape and dtype. Another array, or the same one reshaped or viewed
    as another dtype, is scanned again. A writable one is scanned every time: a script writes
    it in place between fits (a buffer refilled per stage, ``x /= std``), and the network's
    check of each batch named the feed, not the rows, and a test set's only after an epoch of
    training. So is an object that takes no weak reference."""
    fed = str(np.dtype(dtype)) if dtype is not None else ""
    unproved = {n: a for n, a in arrays.items() if not _proved_finite(a, fed)}
    where = not_finite(unproved, dtype, row_words=row_words)
    if where is None:
        for a in unproved.values():
            _remember_finite(a, fed)
    return where


def _proved_finite(a: Any, fed: str) -> bool:
    ref, shape, dtype = _PROVED_FINITE.get((id(a), fed), (None, None, None))
    if ref is None or ref() is not a or shape != tuple(a.shape) or dtype != a.dtype:
        return False
    return _read_only(a)  # made writable again since (its flag set back): written, maybe


def _read_only(a: Any) -> bool:
    """Whether neither ``a`` nor an array it views can be written (a view made read-only of a
    writable array changes with it), nor the buffer under them (``np.frombuffer`` of a
    ``bytearray``, then locked: the bytearray still writes it); an owner of no buffer numpy
    names (one it cannot read as such) counts as written. A read-only ``memoryview`` is asked
    for what it views (``memoryview(bytearray).toreadonly()``: the bytearray writes it)."""
    while isinstance(a, (np.ndarray, memoryview)):
        if isinstance(a, memoryview):
            try:
                if not a.readonly or a.obj is None:  # written, or an owner it does not name
                    return False
            except ValueError:  # released
                return False
            a = a.obj
        elif a.flags.writeable:
            return False
        elif a.base is None:  # it owns its memory, and it is locked
            return True
        else:
            a = a.base
    try:
        with memoryview(a) as buffer:  # a read-only mmap, bytes: True
            return buffer.readonly
    except (TypeError, ValueError):  # no buffer protocol, or a closed mmap
        return False


def _remember_finite(a: Any, fed: str) -> None:
    if not _read_only(a):  # written in place before the next fit, it would not be read again
        return
    key = (id(a), fed)

    def forget(ref: weakref.ref[Any]) -> None:  # only its own entry: the address is reused
        if _PROVED_FINITE.get(key, (None,))[0] is ref:
            del _PROVED_FINITE[key]

    try:
        ref = weakref.ref(a, forget)
    except TypeError:  # no weak references (a __slots__ class): scanned every time
        return
    _PROVED_FINITE[key] = (ref, tuple(a.shape), a.dtype)


def as_fed(part: Any, dtype: Any = None) -> Any:
    """Rows of a host array as :func:`feeds_of` hands them on: integer and boolean ones as
    they are (ids), the others cast to ``dtype`` when one is given."""
    if dtype is None or part.dtype.kind in "iub":
        return part
    return part.astype(dtype, copy=False)


def _id_array(ids: Any) -> Any:
    """``ids`` (a list, tuple or number) as an array; an empty one of int64, not numpy's
    float64. A number stays the 0-d array the layers refuse by name (it has no len())."""
    array = np.asarray(ids)
    return array.astype(np.int64) if array.size == 0 else array
