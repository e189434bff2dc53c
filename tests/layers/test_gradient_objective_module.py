"""The scalar the gradient checks differentiate (:class:`Objective`, :class:`NetworkObjective`)
is a module of its own, :mod:`distconv.gradient_objective`; :mod:`distconv.finite_differences`,
its central differences and their comparison, still gives both names to its importers."""

from __future__ import annotations

import numpy as np

import distconv.finite_differences as fd
import distconv.gradient_objective
from distconv import Arg
from distconv.layers import FullyConnected
from tests.moved_names import assert_moved


def test_the_objective_is_its_own_module_and_still_importable_from_finite_differences(rng):
    assert_moved(fd, distconv.gradient_objective, ["Objective", "NetworkObjective"])
    x = Arg(rng.standard_normal((4, 3)), needs_grad=True)
    obj = fd.Objective(FullyConnected(3, 2), [x], rng)
    # f is affine in the input: f(2x) - f(x) = f(x) - f(0), and f(x) is f0, x put back after
    at_zero, doubled = obj.values_at(x, 0 * x.value, 2 * x.value)
    assert np.isclose(doubled - obj.f0, obj.f0 - at_zero, rtol=1e-12, atol=1e-12)
    assert obj.value() == obj.f0 and abs(obj.f0 - at_zero) > 1e-3
