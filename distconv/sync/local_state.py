"""What :class:`~distconv.sync.local.LocalSync` takes as optimizer state, apart from the class:
the checks of a state given to ``load_state_dict`` (:func:`state_problems`, which checkpoints
and the parameter server's state checks use too, and its count and number tests), and the
carrying of a parameter's old state into the buffers a new setup made (:func:`_copy_state`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from distconv.backend import copy_into, is_float_dtype, is_gpu_array, to_host
from distconv.sync.base import PER_ROW, StateDict

#: suffix of a dense parameter's counts as runs of rows (``step`` -> ``step_runs_per_row``,
#: see :mod:`distconv.sync.ps.row_counts`)
RUNS = "_runs" + PER_ROW


def state_problems(ours: StateDict, theirs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What in ``theirs`` has no buffer in ``ours``, or one of another shape: a name there was
    a bare KeyError, and a shape numpy broadcasts ((1,) into (3,)) was copied without a word.
    ``theirs``, or an entry of it, that is no mapping (``{"w": array}``), and a state key that
    is no string, are named too: each was a bare AttributeError; so is a value that is no
    array of numbers (``{"w": {"step": None}}``)."""
    if not isinstance(theirs, Mapping):
        return [f"state is {_a(theirs)}, not a mapping of parameter names to their state"]
    problems = []
    for name, buffers in theirs.items():
        if name not in ours:
            problems.append(f"state for {name!r}, which is no parameter of its setup")
            continue
        if not isinstance(buffers, Mapping):
            problems.append(
                f"state for {name!r} is {_a(buffers)}, not a mapping of state keys to arrays "
                f"(it has {sorted(ours[name])})"
            )
            continue
        for key, value in buffers.items():
            if per_row_count(ours[name], key):
                continue  # (each kept as ours[name]'s count: a parameter server's checks them)
            if not isinstance(key, str) or key not in ours[name]:
                strings = "" if isinstance(key, str) else "state keys are strings: "
                problems.append(
                    f"{name!r} has no state {key!r} ({strings}it has {sorted(ours[name])})"
                )
            elif (what := not_numbers(value)) is not None:
                problems.append(f"{name}/{key}: {what} given, not an array of numbers")
            elif tuple(np.shape(value)) != tuple(ours[name][key].shape):
                problems.append(
                    f"{name}/{key}: shape {tuple(np.shape(value))} given, "
                    f"{tuple(ours[name][key].shape)} here"
                )
            elif is_count(ours[name][key]) and (what := not_counts(value)) is not None:
                problems.append(f"{name}/{key}: {what}")
    return problems


def is_count(buffer: Any) -> bool:
    """Whether ``buffer`` is a count (Adam's ``step``): a 0-d integer one, or a Python int (not
    a bool), which a save takes as one. Every other state buffer takes its parameter's float
    dtype and shape."""
    if isinstance(buffer, int):
        return not isinstance(buffer, bool)
    dtype = getattr(buffer, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind in "iu" and np.ndim(buffer) == 0


def per_row_count(ours: Mapping[str, Any], key: Any) -> bool:
    """Whether ``key`` is a per-row key (``K + PER_ROW``, or ``K + RUNS``) holding the rows'
    values of a count ``K`` of ``ours`` (a 0-d integer, Adam's ``step``): the parameter server
    writes them of its scalar counts only, so another (``step_per_row`` to Momentum, which
    keeps no ``step``; an optimizer's own float buffer named ``v_per_row``) is no such copy."""
    if not isinstance(key, str) or not key.endswith(PER_ROW):
        return False
    scalar = (key.removesuffix(RUNS), key.removesuffix(PER_ROW))
    return any(k in ours and is_count(ours[k]) for k in scalar)


def _a(value: Any) -> str:
    """``a list``, ``a ndarray``: the type of a value where a mapping belongs."""
    return f"a {type(value).__name__}"


def not_numbers(value: Any) -> str | None:
    """What ``value`` is (``a NoneType``, ``a ndarray of <U1``) where a state array belongs,
    or None for numbers a buffer takes (an array, a list, a scalar, on the host or the GPU).

    ``np.shape(None)`` is ``()``: a scalar buffer's (Adam's ``step``) passed the shape check,
    and the copy raised a bare TypeError after the other keys were copied."""
    dtype = getattr(value, "dtype", None)
    of = f" of {dtype}" if isinstance(dtype, np.dtype) else ""
    if not of:
        try:
            dtype = np.asarray(value).dtype
        except (TypeError, ValueError):  # a ragged list
            return _a(value)
    return None if dtype.kind in "biufc" or is_float_dtype(dtype) else _a(value) + of


#: what a count is: a buffer keeps it as int64, and a larger one went there as -2**63
_A_COUNT = "a count (a whole number from 0 to 2**63 - 1, as int64 holds)"


def not_counts(value: Any) -> str | None:
    """Why ``value`` is no array of counts, or None where it is one: integers, or floats
    holding whole numbers (PyTorch keeps Adam's ``step`` as a float), from 0 to int64's
    largest (a runs key's first rows are checked alike, being rows). Numpy cast -1 to a count
    of -1, NaN and 2**63 to -2**63, 2.5 to 2."""
    if (what := not_numbers(value)) is not None:
        return f"{what} given, not an array of numbers"
    a = np.asarray(to_host(value))
    if a.dtype.kind == "c":
        return f"complex {a.dtype} given, not {_A_COUNT}"
    if a.dtype.kind in "biu":
        bad = (a < 0) | (a > np.iinfo(np.int64).max)
    else:
        f = a.astype(np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(f) | (f < 0) | (f >= 2.0**63) | (f != np.floor(f))
    if not np.any(bad):
        return None
    return f"holds {a[bad].ravel()[0].item()!r}, not {_A_COUNT}"


def _copy_state(fresh: Mapping[str, Any], old: Mapping[str, Any]) -> None:
    """``old``'s values into ``fresh``'s buffers (their dtype and device); a buffer that is
    already alike is taken as it is, so a second fit copies nothing. A parameter given a value
    of another shape (a table grown) starts afresh: numpy would spread its old moments over
    the new shape without a word."""
    if any(old[key].shape != buffer.shape for key, buffer in fresh.items()):
        return
    for key, buffer in fresh.items():
        same = old[key].dtype == buffer.dtype and is_gpu_array(old[key]) == is_gpu_array(buffer)
        if same:
            fresh[key] = old[key]  # type: ignore[index]
        else:
            copy_into(buffer, old[key])
