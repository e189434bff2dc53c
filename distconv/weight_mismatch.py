"""Where two sets of weights differ: the parameter furthest apart, where and by how much.

What :mod:`distconv.equivalence` says of a rank whose weights are not the reference's, and what
the tests that compare trained weights with one process's say too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

#: the largest difference allowed, relative to a parameter's largest value: float64 summed in
#: another order differs in its last bits, a step of a wrong transport by far more
TOLERANCE = 1e-10


def max_relative_difference(expected: Mapping[str, Any], got: Mapping[str, Any]) -> float:
    """The largest ``max|a - b| / max(|a|, |b|)`` over ``expected``'s parameters."""
    return max((_relative(expected[k], got[k]) for k in expected), default=0.0)


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    """``max|a - b| / max(|a|, |b|)``; infinite where either holds a NaN."""
    scale = max(float(np.abs(a).max(initial=0)), float(np.abs(b).max(initial=0)), 1e-300)
    apart = float(np.abs(a - b).max(initial=0)) / scale
    return apart if apart == apart else math.inf


def mismatch(
    expected: Mapping[str, np.ndarray],
    got: Mapping[str, np.ndarray],
    tolerance: float = TOLERANCE,
    than: str = "the reference's",
) -> str | None:
    """What is wrong with ``got`` next to ``expected`` (the parameter furthest apart, where
    and by how much), or None where every parameter is within ``tolerance`` (relative)."""
    names = sorted(set(expected) ^ set(got))
    if names:
        return f"parameters {names} are not in both (it has {sorted(got)})"
    for name in expected:
        if np.shape(expected[name]) != np.shape(got[name]):
            return f"parameter {name!r} is {np.shape(got[name])}, not {np.shape(expected[name])}"
    apart = {n: _relative(expected[n], got[n]) for n in expected}
    worst = max(apart, key=apart.__getitem__, default=None)
    if worst is None or apart[worst] <= tolerance:
        return None
    a, b = np.asarray(expected[worst]), np.asarray(got[worst])
    apart_at = np.abs(a - b)
    at = np.unravel_index(int(np.argmax(np.where(apart_at == apart_at, apart_at, np.inf))), a.shape)
    beyond = sum(1 for r in apart.values() if r > tolerance)
    here, there = float(b[at]), float(a[at])
    return (
        f"parameter {worst!r} is {abs(here - there):.3g} from {than} at {tuple(map(int, at))}"
        f" ({here!r} here, {there!r} there: {apart[worst]:.3g} of its largest value, "
        f"tolerance {tolerance:g}; {beyond} of {len(apart)} parameters beyond it)"
    )
