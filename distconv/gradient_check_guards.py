"""What a gradient check (:mod:`distconv.gradient_check`) refuses before it judges a gradient,
and what it puts back however it ends: settings out of range (:func:`_check_settings`), arrays
in which finite differences cannot tell a wrong gradient from a right one
(:func:`_refuse_narrow`), a scalar that is not finite (:func:`_refuse_not_finite`), and the
parameters' arrays, flags and counts the check changes (:func:`kept`); and the rows of each
sparse table a backward wrote, against the rows its layers noted and read (:func:`noting`,
:func:`check_sparse_rows`), which only a parameter server's push relies on."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from distconv.analytic_pass import refuse_holding_not_finite
from distconv.backend import to_host
from distconv.finite_differences import Objective
from distconv.layers.written_rows import close_rows, open_rows, rows_holding, take_rows
from distconv.optim_base import _check
from distconv.parameter import Parameter
from distconv.sampler import check_count


def _check_settings(step: float | None, tol: float | None, elements: int) -> None:
    """ValueError naming ``step``, ``tol`` or ``elements`` where it is out of range."""
    for name, given in (("step", step), ("tol", tol)):
        if given is not None:  # NaN, inf and str too
            _check(name, given, low=0.0, low_open=True)
    check_count("elements", elements, 0)


@contextmanager
def kept(params: list[Parameter]) -> Iterator[None]:
    """Put back on each of ``params`` what a check changes, however the check ends: its value
    and gradient arrays (the same objects, the gradient's contents too), ``static``, its count
    of users and the users it has counted in the pass. The check counts the users itself and
    zeroes the gradient; left so, a weight shared by layers called by hand fired after its
    first user with part of its gradient, and a gradient accumulated over passes was lost."""
    saved = {id(p): (p, p.value, p.grad, p.static, p.shared_count, p._pending) for p in params}
    grads = {key: grad.copy() for key, (_, _, grad, *_) in saved.items() if grad is not None}
    try:
        yield
    finally:
        for key, (p, value, grad, static, count, pending) in saved.items():
            p.value, p.grad, p.static, p.shared_count = value, grad, static, count
            p._pending = pending  # no setter: a pass half counted is rare outside a check
            if grad is not None:
                grad[...] = grads[key]


def _refuse_not_finite(obj: Objective, params: list[Parameter]) -> None:
    """ValueError for an input or a parameter holding NaN or inf, AssertionError for an output
    that does without them: either way ``f`` is not finite, every numeric derivative is NaN,
    and no gradient can be judged (each comparison with NaN passed, a wrong gradient too)."""
    if np.isfinite(obj.f0):
        return
    refuse_holding_not_finite(obj, params)
    raise AssertionError(f"{obj.subject}: its output is not finite (NaN or inf) for finite inputs")


def _refuse_narrow(subject: str, what: str, dtype: np.dtype) -> None:
    """TypeError unless ``dtype`` is float32 or float64 (or wider), what finite differences can
    judge. ml_dtypes' bfloat16 ...: numpy's finfo does not know them. float16: its rounding of f
    outweighs what the step moves f by, so the floor in finite_differences.compare passed any
    gradient (a layer whose backward added nothing at all passed). A bfloat16 weight under a
    float32 output (its matrix products return float32) rounds the step away: a right gradient
    was called off."""
    if dtype.kind != "f" or dtype.itemsize < 4:
        raise TypeError(
            f"{subject}: {what} is {dtype}; finite differences need numpy's float32 or "
            "float64 (float64 for a tight check): cast the weights and inputs"
        )


@contextmanager
def noting(params: list[Parameter]) -> Iterator[dict[str, Any]]:
    """Keep what the layers note (``note_rows``) of the trainable sparse tables among
    ``params`` while the block runs; the dict it yields then holds, by table name, the rows
    noted (:func:`take_rows`: None where some write was not noted)."""
    tables = [p for p in params if p.sparse_rows and not p.static]
    noted: dict[str, Any] = {}
    for p in tables:
        open_rows(p)
    try:
        yield noted
        noted.update((p.name, take_rows(p)) for p in tables)
    finally:
        for p in tables:
            close_rows(p)


def check_sparse_rows(
    subject: str,
    grads: Mapping[str, Any],
    noted: Mapping[str, Any],
    read: Mapping[str, Any] | None,
) -> None:
    """AssertionError where a sparse table's gradient of one pass (``grads``, by ``param
    <name>``) holds rows its layers, having ``noted`` their writes, left out, or where the
    rows noted (else written) are not all among those its layers ``read`` (``rows_read``; None:
    unknown before forward). A parameter server trusts both: it holds back rows left out of
    the notes, and refuses rows outside those read; every other transport ignores them."""
    for name, rows in noted.items():
        written = rows_holding(grads[f"param {name}"])
        if rows is not None and len(left := np.setdiff1d(written, rows, True)):
            raise AssertionError(
                f"{subject}: parameter {name}: its backward wrote rows {_some(left)} that it did "
                "not pass to note_rows: a parameter server trusts the notes and holds those "
                "rows' update back; note every row the backward adds into, or none"
            )
        said = written if rows is None else rows
        if read is not None and len(missed := np.setdiff1d(said, _ids(read.get(name)), True)):
            how = "written" if rows is None else "noted as written"
            raise AssertionError(
                f"{subject}: parameter {name}: rows {_some(missed)} {how} by its backward are "
                "not among its layers' rows_read: a parameter server moves only the rows "
                "rows_read reports, and refuses a gradient in others; report every row the "
                "forward reads in rows_read, and note only the rows the backward adds into"
            )


def _ids(rows: Any) -> np.ndarray:
    """Row ids (any device, repeats) as sorted distinct int64 on the host; None: none."""
    return np.unique(np.asarray(to_host(rows) if rows is not None else [], np.int64))


def _some(rows: np.ndarray) -> str:
    """The first 8 of ``rows`` and how many in all."""
    return f"{rows[:8].tolist()} ({len(rows)} in all)"
