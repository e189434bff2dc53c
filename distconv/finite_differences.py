"""The numeric side of :mod:`distconv.gradient_check`: the scalar it differentiates
(:class:`Objective`, ``f = sum(output * r)`` of a layer; :class:`NetworkObjective`, the sum
of a network's loss: :mod:`distconv.gradient_objective`, importable from here), its central
finite differences along a direction, and their comparison with an analytic gradient, judged
above the rounding of the outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from distconv.backend import get_array_module, to_host
from distconv.float64_redo import AnotherFunction, rounds_inside, widened

# the scalar differentiated, still importable from here, where the gradient checks import it
from distconv.gradient_objective import NetworkObjective as NetworkObjective
from distconv.gradient_objective import Objective
from distconv.kept_hint import kept_hint
from distconv.messages import named

#: (step, tolerance on the relative difference) per dtype
DEFAULTS = {np.dtype(np.float64): (1e-6, 1e-6), np.dtype(np.float32): (1e-3, 2e-2)}
#: entries of an array judged one at a time before a refusal at a kink stands: all of a bias's
#: or a small input's, which the few drawn ones may all miss
KINK_ENTRIES = 256


class KinkHere(ValueError):
    """The point checked is a kink of ``f`` (a ReLU input exactly 0, tied maxima): its one-sided
    slopes part there however small the step, and no gradient is the derivative at it."""


def central(obj: Objective, owner: Any, direction: Any, step: float, name: str) -> tuple:
    """``(f(v + step*d) - f(v - step*d)) / (2 step)``, restoring ``v`` afterwards, ``d`` as
    taken: rounded to ``v``'s dtype (``3000 + 1e-3`` is ``3000 + 9.8e-4`` in float32), and the
    one-sided slopes ``(f(v + step*d) - f(v)) / step`` and ``(f(v) - f(v - step*d)) / step``.

    Layers read ``param.value`` and ``arg.value`` at each forward, so swapping the attribute
    perturbs a parameter and an input alike. ValueError: rounding loses the step of an entry.
    """
    original, d, base = owner.value, to_host(direction), owner.value.astype(np.float64)
    plus, minus = ((base + s * step * direction).astype(original.dtype) for s in (1, -1))
    taken = to_host(plus.astype(np.float64) - minus.astype(np.float64)) / (2 * step)
    taken = np.where(np.isfinite(taken), taken, d)  # an inf entry stays put: d, as it was
    if bool(((taken == 0) & (d != 0)).any()):
        what = f"{name} to {original.dtype}"
        raise ValueError(
            f"{obj.subject}: step {step:g} is lost rounding {what}; give a larger step"
        )
    f_plus, f_minus = obj.values_at(owner, plus, minus)
    sides = ((f_plus - obj.f0) / step, (obj.f0 - f_minus) / step)
    return (f_plus - f_minus) / (2 * step), taken, sides


def check_array(
    obj: Objective,
    owner: Any,
    grad: Any,
    step: float,
    tol: float,
    elements: int,
    rng: np.random.Generator,
    name: str,
    *,
    elements_first: bool = False,
) -> float:
    """The worst relative difference of ``grad``, the gradient of ``owner.value`` called
    ``name``, from finite differences of ``obj`` with ``step``: along a random direction with
    the gradient's signs, and at ``elements`` single entries drawn by ``rng``.

    Args:
        elements_first: check the single entries before the direction, so that a gradient
            wrong throughout is named at an entry (``name[i, j]``), not along the direction;
            the direction comes first otherwise, and decides whether it can be judged at all.

    Raises:
        AssertionError: one differs by more than ``tol`` (:func:`compare`).
        KinkHere: the point is a kink along one of them, and none differs, nor any of up to
            :data:`KINK_ENTRIES` entries then judged alone (the message says how many).
        ValueError: the gradient cannot be judged in the output's dtype, or ``step`` is lost
            rounding an entry.
    """
    xp = get_array_module(grad)
    g = to_host(grad).astype(np.float64)
    # Paddle's direction: random magnitudes, signs of the gradient (random where it is zero).
    signs = np.where(g != 0, np.sign(g), rng.choice([-1.0, 1.0], g.shape))
    direction = signs * rng.uniform(0.5, 1.5, g.shape)
    flat = rng.choice(g.size, size=min(elements, g.size), replace=False)

    def along() -> float:
        return compare(obj, owner, xp.asarray(direction), g, step, tol, name, resolve=True)

    def at(k: int) -> float:
        # a kink at the point refuses whatever the derivative: one entry may move several kinks
        # (an input pixel under a zero-bias convolution's channels), and a right derivative is
        # then a sum of one side's slope at each, which need not lie between the entry's slopes
        # (a right network's input pixel was called off at 8 of 10 seeds)
        e = np.zeros(g.shape)
        e.flat[k] = 1.0
        where = f"{name}{[int(i) for i in np.unravel_index(k, g.shape)]}"
        return compare(obj, owner, xp.asarray(e), g, step, tol, where, any_side=True)

    entries = [lambda k=k: at(k) for k in flat]
    checks = [*entries, along] if elements_first else [along, *entries]
    # the first refusal at a kink (a wrong gradient elsewhere is named before it), kept alone:
    # each one's traceback holds its frames' arrays, and 256 of a 1e6-entry array's took 6 GB
    kinks: list[KinkHere] = []

    def judged(check: Callable[[], float]) -> float:
        try:
            return check()
        except KinkHere as exc:
            kinks[:] = kinks or [exc]
            return 0.0

    worst = max(judged(check) for check in checks)
    if not kinks:
        return worst
    # a refusal says nothing of the entries off the kinks, which a direction through several
    # kinks takes at any value: a gradient halved at 5 of 100 entries, none of them drawn, was
    # refused as one that cannot be judged; more entries are judged alone before it stands,
    # where a kink refuses whatever the derivative (a right one need not lie between the slopes
    # of one entry's several kinks): a right network's input pixel was called off
    more = more_entries(rng, g.size, flat)
    for k in more:
        judged(lambda k=k: at(k))
    alone = len(flat) + len(more)
    rest = "" if alone == g.size else "; the others are not judged"
    raise KinkHere(f"{kinks[0]} ({alone} of its {g.size} entries judged alone: none off{rest})")


def more_entries(rng: np.random.Generator, size: int, drawn: np.ndarray) -> list[int]:
    """The entries of an array of ``size`` that :func:`check_array` judges alone before a
    refusal at a kink stands: drawn by ``rng``, none of ``drawn`` (those checked already), as
    many as bring the entries judged to :data:`KINK_ENTRIES`, and none where ``drawn`` holds
    as many (``elements=300`` judged 956 of 1000). A draw of that many, not a permutation of
    the whole array walked in Python."""
    wanted = min(max(KINK_ENTRIES - len(drawn), 0), size - len(drawn))
    pool = rng.choice(size, size=wanted + len(drawn), replace=False)
    return [int(k) for k in pool[~np.isin(pool, drawn)][:wanted]]


def compare(
    obj: Objective,
    owner: Any,
    direction: Any,
    g: np.ndarray,
    step: float,
    tol: float,
    name: str,
    resolve: bool = False,
    retry: bool = True,
    first: tuple[float, tuple[float, float]] | None = None,
    any_side: bool = False,
) -> float:
    """The relative difference of ``g``'s and the numeric derivative along ``direction`` taken.

    Where they differ, a central difference across a kink (a ReLU, a max pool's choice) or a
    curve that bends within the step may be no derivative at the point, so the comparison is
    made again and its verdict stands: in float32, in float64 (:func:`widened`) at float64's
    step; in float64, at a step ten times smaller, against the floor of that step only where
    it moves the central difference beyond rounding (a kink the first step crossed moves it;
    along a line it stays, and the smaller step's ten times higher floor passed a wrong
    gradient of a small derivative). Only where that cannot be made (a layer that computes in
    its own dtype, a smaller step lost to rounding) or float64 computes another function
    (:class:`~distconv.float64_redo.AnotherFunction`) does this one decide.

    Args:
        resolve: the direction follows the gradient's signs, so a derivative along it that
            is not zero and is below the floor must stand above the outputs' rounding noise to
            be judged at all.
        retry: whether a float64 comparison that fails is made again at a smaller step.
        any_side: refuse at a kink at the point wherever ``g``'s derivative lies, as along
            several entries: for the entries judged after a refusal, which look for a wrong
            gradient off the kinks, and must not call a right one off at one entry's kink of
            several pieces (one input pixel under a zero-bias convolution's channels).
        first: the retry's: the first step's numeric derivative and one-sided slopes; where
            this one is within rounding of it, the first step's floor is kept, and where the
            slopes part alike at both steps the point is a kink (:func:`refuse_a_kink_here`).

    Raises:
        AssertionError: they differ by more than ``tol``.
        ValueError: ``resolve`` and the derivative along ``direction`` is within the noise
            and below the floor; or, in float32 with no float64 comparison to be had, they
            differ where ``f`` bends within the step (its one-sided slopes differ by more
            than rounding) and ``g``'s derivative lies between those slopes, or outside by
            no more than their gap and ``tol``: a kink's, which cannot be judged there; or
            anywhere ``f`` bends so, where float64 computes another function.
        KinkHere: in float64, at both steps, the point is a kink with ``g``'s derivative
            between its one-sided slopes, or anywhere along several entries
            (:func:`refuse_a_kink_here`).
    """
    numeric, taken, (right, left) = central(obj, owner, direction, step, name)
    analytic = float((g * taken).sum())
    # Rounding in f limits the numeric derivative to about eps*|f|/step: derivatives below that
    # floor (a dead ReLU, a zero entry) are judged on an absolute scale instead of their own.
    eps = float(np.finfo(obj.dtype).eps)
    floor = 10 * eps * max(abs(obj.f0), 1.0) / (step * tol)
    # a retry that moved the central difference by no more than rounding does at this step and
    # the first's, ten times larger, found no kink: judged against the first step's floor
    rounded = max(eps * max(abs(obj.f0), 1.0), obj.rounding) * 1.1 / step
    if first is not None and abs(numeric - first[0]) <= rounded:
        floor /= 10
    noise = 10 * obj.rounding / step  # what rounding the outputs may move ``numeric`` by
    # within the noise and judged against the floor from |f0|, any gradient of this size passed:
    # in float32 under a large output, a backward that added nothing to a weight.
    # Above the floor it is judged on its own scale, where a wrong one fails; refused there too,
    # a float32 FC or convolution whose derivatives agreed to 1e-4 could not be checked:
    # the noise bounds the worst case, and grows with the count of outputs
    if resolve and max(abs(analytic), abs(numeric)) < min(noise, floor) and (analytic or numeric):
        raise ValueError(
            f"{obj.subject}: the gradient of {name} cannot be judged in {obj.dtype}: along the "
            f"gradient it is {analytic:.4g} (numeric {numeric:.4g}), within the {noise:.3g} "
            "that rounding the outputs may move a finite difference by; check in float64 or "
            "on smaller outputs"
        )
    diff = abs(analytic - numeric) / max(abs(analytic), abs(numeric), floor)
    if diff <= tol:
        return diff
    why, another = "", None  # why float32 has no float64 comparison, for the message
    try:
        if obj.dtype != np.float64:
            narrow, wide_step = np.dtype(owner.value.dtype), DEFAULTS[np.dtype(np.float64)][0]
            with widened(obj) as (wide, why):
                if wide is None:
                    pass
                elif rounds_inside(wide, owner, direction, (wide_step, step), narrow):
                    why = f"it rounds {name} to {narrow} inside"
                else:
                    return compare(
                        wide, owner, direction, g, wide_step, tol, name, any_side=any_side
                    )
        elif retry:
            again = (obj, owner, direction, g, step / 10, tol, name)
            return compare(*again, retry=False, first=(numeric, (right, left)), any_side=any_side)
        elif first is not None:  # the retry failed too: a kink within a tenth of the step?
            # the slopes part beyond what float64 computes them to, whatever tolerance judges
            # (a float32 check's redo: 0.02), and at their own scale, not at the analytic's
            apart = DEFAULTS[obj.dtype][1] * max(abs(numeric), floor) + 2 * noise
            within = (apart, tol * max(abs(analytic), abs(numeric), floor) + 2 * noise)
            slopes = (first[1], (right, left))
            several = any_side or np.count_nonzero(taken) > 1
            refuse_a_kink_here(obj.subject, name, step, slopes, analytic, within, several)
    except KinkHere:  # float64's verdict, from the redo of a float32 comparison: it stands
        raise
    except AnotherFunction as exc:  # the redo's verdict would judge another function
        why, another = str(exc), exc
    except (TypeError, ValueError) as exc:  # a smaller step lost to rounding, float64 refused
        why = f"in float64 it raised {named(exc)}"
    # across a kink the derivative at the point is one side's slope; one outside both, by more
    # than their gap, is off (a curve's slopes part too: a float32-only tanh's halved
    # gradient was "a kink?"). Not where float64 computes another function: a right layer
    # whose step crossed kinks on both sides, of several entries, lay outside both slopes
    slack = tol * max(abs(analytic), abs(numeric), floor) + 2 * noise + abs(right - left)
    between = min(right, left) - slack <= analytic <= max(right, left) + slack
    between = between or another is not None
    if obj.dtype != np.float64 and abs(right - left) > 2 * noise and between:
        raise ValueError(
            f"{obj.subject}: the gradient of {name} cannot be judged in {obj.dtype}: f bends "
            f"within the step of {step:g} (one-sided slopes {right:.6g} and {left:.6g}: a "
            f"kink?), analytic {analytic:.10g}, numeric {numeric:.10g}, and "
            + (
                f"it has no float64 comparison ({why}): check it where the step crosses no kink "
                "(another seed or other inputs), or let it compute in float64"
                if another is None
                else f"{another}: {another.advice}"
            )
        )
    # NaN too: a comparison with NaN is False, and NaN passed
    raise AssertionError(
        f"{obj.subject}: gradient of {name} is off: analytic {analytic:.10g}, "
        f"numeric {numeric:.10g}, relative difference {diff:.3g} > {tol}"
        + (kept_hint(obj, owner) if numeric == 0 and analytic != 0 else "")
        + ("" if another is None else f"; judged in {obj.dtype}, as {another}: {another.advice}")
    )


def refuse_a_kink_here(
    subject: str,
    name: str,
    step: float,
    slopes: tuple[tuple[float, float], tuple[float, float]],
    analytic: float,
    within: tuple[float, float],
    several: bool,
) -> None:
    """Refuse to judge the gradient of ``name`` at a point that is a kink of ``f``.

    A kink inside a step but off the point shows one-sided slopes whose gap shrinks as the step
    does (a curve's shrinks tenfold); a kink at the point shows the same gap at any step. A
    freshly built convolution (zero bias) on a zero background puts ReLU inputs exactly at 0,
    and its right gradient, one side's slope (relu'(0) = 0, the first of tied maxima), was
    called off in float64, where no smaller step could help.

    Args:
        slopes: the (right, left) one-sided slopes at ``step * 10`` and at ``step``.
        analytic: the analytic derivative along the direction.
        within: how far the slopes may be from each other, by rounding and float64's
            tolerance at their own scale, and ``analytic`` from them, by the tolerance judging
            it. The first was the second: a right float32 max pool on zeros, whose analytic
            derivative along several kinks lay 7 times the central one, was called off at 30
            of 80 seeds, its slopes' gap within a fiftieth of that; and a wrong gradient, the
            larger, widened what "alike" takes.
        several: the direction moves several entries. Each kink it crosses adds one side's
            slope by the layer's convention, not the same side for all (a max pool's first of
            tied maxima, whose sign follows its weight in ``f``), so the sum need not lie
            between the slopes of the sum: a right max pool on a zero background lay at twice
            the larger. Along a single entry it must, and outside it is off.

    Raises:
        KinkHere: the slopes part by more than twice the first of ``within``, by the same gap
            (to a tenth and it) at both steps, and ``several`` or ``analytic`` lies between
            them (to the second); otherwise nothing, and the caller judges ``analytic`` off.
    """
    (wide_right, wide_left), (right, left) = slopes
    (apart, near) = within
    gap, wide_gap = right - left, wide_right - wide_left
    parted = abs(gap) > 2 * apart
    alike = abs(gap - wide_gap) <= 0.1 * max(abs(gap), abs(wide_gap)) + apart
    between = min(right, left) - near <= analytic <= max(right, left) + near
    if not (parted and alike and (several or between)):
        return
    # outside them is what a right backward gives as often as a wrong one: a sum of one side's
    # slope at each kink crossed
    where = "between them" if between else "outside them, as along several kinks, right or not"
    raise KinkHere(
        f"{subject}: the gradient of {name} cannot be judged at this point: it is a kink of f, "
        f"whose one-sided slopes (right {right:.10g}, left {left:.10g}) part alike at steps "
        f"{step * 10:g} and {step:g}, and no derivative is taken there (analytic "
        f"{analytic:.10g}, {where}), as where a ReLU's input is exactly 0 or maxima tie (a "
        "zero bias over zero inputs); a wrong gradient is refused here as a right one is, so "
        "check it at a point off the ties, where a wrong one fails: draw the biases away "
        "from 0, or add noise to the inputs"
    )
