"""The float64 redo of a float32 gradient comparison that failed, for
:func:`distconv.finite_differences.compare`: the objective computed on float64 copies of the
parameters and inputs (:func:`widened`), and whether a layer rounds them back to float32 inside,
where float64's step measures the rounding, not the layer (:func:`rounds_inside`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from distconv.backend import get_array_module, is_float_dtype
from distconv.messages import named

if TYPE_CHECKING:  # finite_differences imports this module
    from distconv.finite_differences import Objective


def rounds_inside(obj: Objective, owner: Any, direction: Any, steps: tuple, narrow: Any) -> bool:
    """Whether ``obj``, on float64 copies, computes ``f`` of ``owner``'s values rounded to
    ``narrow`` (a layer that casts to float32 inside and hands back its input's dtype): at
    each move of ``steps`` along ``direction`` that moves ``f`` at all, the move's rounding to
    ``narrow`` moves it alike. float64's step is then a few of ``narrow``'s spacings, or none,
    and its central difference the rounding's noise: where ``f`` is 10 + x**2, a backward that
    added nothing passed, float64's step leaving ``f`` where it was."""
    v, seen = owner.value, []
    for moved in (v + s * step * direction for step in steps for s in (1.0, -1.0)):
        rounded = moved.astype(narrow).astype(moved.dtype)
        if bool((moved == rounded).all()):
            continue  # nothing finer than ``narrow`` to see (``owner`` was float64 already)
        f_moved, f_rounded = obj.values_at(owner, moved, rounded)
        if f_moved != obj.f0:
            seen.append(f_moved == f_rounded)
    return bool(seen) and all(seen)


class AnotherFunction(Exception):
    """The float64 redo computes another function than the comparison it would judge: its
    verdict is no verdict on the narrow gradient. ``str()`` says how far the two are apart,
    :attr:`advice` what to do."""

    advice = (
        "draw in a dtype that does not follow the input's (float32 uniforms, float64 normals "
        "cast), or check it in float64"
    )


@contextmanager
def widened(obj: Objective) -> Iterator[tuple[Objective | None, str]]:
    """``obj`` computed in float64: its parameters' and inputs' float values swapped for
    float64 copies of them, put back on leaving; the same ``r``. ``(None, why)`` where its
    output stays narrower (a layer that computes in a dtype of its own) or it raises given
    float64 values (an exception of any kind: a layer's refusal is no verdict on its
    gradient), ``why`` saying which.

    Raises:
        AnotherFunction: at the same point the float64 output is another than ``obj``'s
            (:func:`another_function`).
    """
    arrays = (*obj.params, *obj.inputs)
    owners = [a for a in arrays if a.value is not None and is_float_dtype(a.value.dtype)]
    values = [a.value for a in owners]
    narrow = obj._output().astype(np.float64)  # a copy: the next forward may write into it
    try:
        for a, v in zip(owners, values):
            a.value = v.astype(np.float64)
        try:  # a layer that refuses float64 raises: no float64 comparison, whatever it raises
            out, why = obj._output(), ""  # (a KeyError from a table of float32 kernels ...)
        except Exception as exc:
            out, why = None, f"given float64 values it raised {named(exc)}"
        if out is not None and out.dtype != np.float64:
            out, why = None, f"given float64 values its output is {out.dtype}"
        if out is None:
            yield None, why
            return
        out = out.astype(np.float64)  # a copy: the nudged forward may write into it
        another_function(obj, narrow, out, lambda: _nudged(obj, owners))
        wide = copy.copy(obj)  # a layer may hold the arrays swapped out (kept_hint)
        wide.originals = {id(a): (*obj.originals.get(id(a), ()), v) for a, v in zip(owners, values)}
        wide._settle(out, obj.r.astype(np.float64))
        yield wide, ""
    finally:
        for a, v in zip(owners, values):
            a.value = v


#: how many times what a nudge of the values by a rounding moves the terms of ``f`` by, their
#: move may be and still be rounding (:func:`another_function`): rounding moved them by 1.8
#: times it at most (20000 inputs added in another order; 0.35 times where a bias cancels
#: inputs of 1e4), a layer drawing in its input's dtype by a million times
NUDGES = 100


def another_function(
    obj: Objective, narrow: Any, wide: Any, nudged: Callable[[], Any] | None = None
) -> None:
    """AnotherFunction where ``wide``, the output computed on float64 copies of ``obj``'s
    values, is not ``narrow``, its own output at the same point, give or take rounding: where
    the terms of ``f`` (each output times its ``r``) moved by more than ``sqrt(eps)`` of their
    size, ``eps`` the narrow dtype's, and by more than :data:`NUDGES` times what nudging the
    values by a rounding moves them by (``nudged()``, the output so; not asked where None).

    A layer drawing in its input's dtype draws other numbers in float64, and a right one was
    called off on the redo's word (analytic 10.88, numeric 11.58). Its terms moved by about a
    tenth (its noise's size); over the float32 layers of the tests and of a survey (fully
    connected layers of 20000 inputs, convolutions, losses, a LeNet) rounding moved them by 13
    ``eps`` at most (20000 inputs added in another order), ``sqrt(eps)`` being 2900. The
    terms, not ``f``: under ``r``'s random signs their moves cancel in ``f`` as the outputs
    grow (over 2 million outputs of that layer ``f`` moved by 1300 ``eps``, its terms by
    950000). The nudge: rounding scales with what is added up, not with the outputs, and where
    those cancel (inputs about 1e4, a bias taking it off) a right fully connected layer's
    terms moved by up to 9000 ``eps`` of their size, and it was refused; a nudge moves them
    alike (by about ``eps`` of their size where nothing cancels, where the draws' move is a
    million times it)."""
    xp = get_array_module(wide)
    eps = float(np.finfo(obj.dtype).eps)
    r = obj.r.astype(np.float64)
    moved = float(xp.sum(xp.abs((wide - narrow) * r)))
    size = obj.rounding / eps  # sum |out * r| of obj's first forward
    bound = np.sqrt(eps) * size
    if moved > bound and nudged is not None:  # a second forward only where it may tell
        bound = max(bound, NUDGES * float(xp.sum(xp.abs((nudged() - wide) * r))))
    if moved > bound:  # NaN (an output not finite) is the comparisons' to name
        # of its size: outputs all 0 in the narrow dtype (ReLUs below their kinks) have none,
        # and the division raised ZeroDivisionError out of the check
        ratio = f"{moved / size:.3g} of its size" if size else f"{moved:.3g} from all 0"
        explained = f"{bound / size:.3g}" if size else f"{bound:.3g}"
        raise AnotherFunction(
            "its float64 redo computes another function than the "
            f"{obj.dtype} one (its output moved by {ratio} at the same "
            f"point, where rounding in {obj.dtype} explains at most {explained}: a layer "
            "drawing in its input's dtype, or a path taken in float64 only)"
        )


def _nudged(obj: Objective, owners: list) -> Any:
    """``obj``'s output, in float64, with each of ``owners``' values (float64 copies) nudged by
    a rounding of ``obj``'s dtype (times ``1 + eps`` or ``1 - eps``, the signs drawn from a
    fixed seed); their values put back after."""
    eps, signs = float(np.finfo(obj.dtype).eps), np.random.default_rng(0)
    values = [a.value for a in owners]
    try:
        for a, v in zip(owners, values):
            a.value = v * (1 + eps * get_array_module(v).asarray(signs.choice([-1, 1], v.shape)))
        return obj._output().astype(np.float64)
    finally:
        for a, v in zip(owners, values):
            a.value = v
