"""The gradient check where ``f`` bends within float32's step of 1e-3: at a leaky ReLU's kink
and on curves sharp beside the step (bowls, sines). There a float32 central difference is no
derivative at the point; the comparison that fails is made again in float64, whose verdict
stands. Each wrong gradient here once passed a float32 check through the retry at a ten times
smaller step that this replaced (a curve's truncation taken for a kink's, a floor ten times
higher); the right ones pass at every seed, and a layer that computes in float32 only is told
it cannot be judged there."""

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target

SEEDS = range(5)


def bowl(offset: float = 0.0):
    """``50 (x - 0.3)^2 + offset`` and its derivative."""
    return lambda v: 50 * (v - 0.3) ** 2 + offset, lambda v: 100 * (v - 0.3)


def wave(k: float, a: float, x0: float, slope: float, offset: float = 0.0):
    """``a sin(k x) - s x + offset``, ``s`` leaving the derivative ``slope`` at ``x0``."""
    s = a * k * np.cos(k * x0) - slope
    return lambda v: a * np.sin(k * v) - s * v + offset, lambda v: a * k * np.cos(k * v) - s


def leaky():
    """``0.1 + (x - 0.3)`` right of the kink at 0.3, a leak of 0.01 times that left of it."""
    return (
        lambda v: 0.1 + np.where(v < 0.3, 0.01 * (v - 0.3), v - 0.3),
        lambda v: np.where(v < 0.3, 0.01, 1.0),
    )


#: (name, curve, where it is checked in float32, the wrong backward's factors)
CASES = [
    ("bowl", bowl(), 0.3 + 1e-4, [0.5]),
    ("bowl", bowl(), 0.3 + 3e-4, [0.5]),
    ("bowl over 1", bowl(1.0), 0.3 + 1e-3, [1.05]),
    ("bowl over 10", bowl(10.0), 0.3 + 3e-4, [0.5]),
    ("bowl over 10", bowl(10.0), 0.3 + 1e-2, [1.05]),
    ("sin(50 x)", wave(50, 1.0, 0.02, 0.01), 0.02, [0.5]),
    ("0.001 sin(1000 x)", wave(1000, 0.001, 0.3, 0.01, 1.0), 0.3, [0.5]),
    ("leaky ReLU", leaky(), 0.3 - 2e-4, [0.0, 0.5]),  # the step crosses the kink
]


class Curve(Layer):
    """``y = f(x)``, computed in float64 and cast to ``dtype`` (None: the input's); its
    backward scaled by ``factor``."""

    def __init__(self, curve, factor: float, dtype=None) -> None:
        super().__init__()
        (self.f, self.df), self.factor, self.dtype = curve, factor, dtype

    def _forward(self, x):
        return self.f(x.value.astype(np.float64)).astype(self.dtype or x.value.dtype)

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None:
            v = self.inputs[0].value.astype(np.float64)
            dx += (self.factor * dz * self.df(v)).astype(dx.dtype)


def _at(x: float, dtype=np.float32) -> list[Arg]:
    return [Arg(np.array([x], dtype), needs_grad=True)]


WRONG = [pytest.param(c, x, f, id=f"{n} at {x:g}, x{f}") for n, c, x, fs in CASES for f in fs]
RIGHT = [pytest.param(c, x, id=f"{n} at {x:g}") for n, c, x, _ in CASES]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("curve, x, factor", WRONG)
def test_a_wrong_gradient_where_f_bends_within_the_step_fails_in_float32(curve, x, factor, seed):
    at = _at(x)
    value = at[0].value
    with pytest.raises(AssertionError, match=r"Curve: gradient of input 0.* is off"):
        check_layer_grad(Curve(curve, factor), at, elements=1, seed=seed)
    assert at[0].value is value  # the float64 comparison's copy put back


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("curve, x", RIGHT)
def test_the_right_gradient_there_passes_in_float32(curve, x, seed):
    at = _at(x)
    value = at[0].value
    assert check_layer_grad(Curve(curve, 1.0), at, elements=1, seed=seed).worst <= 2e-2
    assert at[0].value is value and value.dtype == np.float32


@pytest.mark.parametrize("seed", SEEDS)
def test_float64_retries_a_kink_within_its_step_at_a_smaller_one(seed):
    """Its step of 1e-6 crosses the kink 2e-7 away; a tenth of it does not."""
    at = _at(0.3 - 2e-7, np.float64)
    assert check_layer_grad(Curve(leaky(), 1.0), at, elements=1, seed=seed).worst <= 1e-6
    with pytest.raises(AssertionError, match=r"Curve: gradient of input 0.* is off"):
        check_layer_grad(Curve(leaky(), 0.5), at, elements=1, seed=seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_layer_computing_in_float32_only_cannot_be_judged_across_a_kink(seed):
    """No float64 comparison to be had: across the kink, even the right gradient is refused as
    one that cannot be judged there; at a point where f is straight a wrong one fails."""
    layer = Curve(leaky(), 1.0, dtype=np.float32)
    with pytest.raises(ValueError, match=r"cannot be judged in float32: f bends within the step"):
        check_layer_grad(layer, _at(0.3 - 2e-4), elements=1, seed=seed)
    with pytest.raises(AssertionError, match=r"Curve: gradient of input 0.* is off"):
        check_layer_grad(Curve(leaky(), 0.5, dtype=np.float32), _at(0.25), elements=1, seed=seed)


#: (name, curve, where): f straight or curved, its derivative there small beside |f| (1e-8,
#: 1e-5 under f near 1000): under the floor of float64's step, which a tenth of it raises tenfold
SMALL = [
    ("1 + 1e-8 x", (lambda v: 1 + 1e-8 * v, lambda v: 1e-8 + 0 * v), 0.3),
    ("1000 + 1e-5 x", (lambda v: 1e3 + 1e-5 * v, lambda v: 1e-5 + 0 * v), 0.3),
    ("bowl over 1", bowl(1.0), 0.3 + 1e-10),
]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("curve, x", [pytest.param(c, x, id=n) for n, c, x in SMALL])
def test_float64s_smaller_step_keeps_the_first_floor_where_no_kink_moved_it(curve, x, seed):
    """Its step of 1e-6 crosses no kink here, and a tenth of it moves the central difference
    by rounding alone. Judged against that step's ten times higher floor, a backward that
    added nothing or half the gradient passed."""
    right = check_layer_grad(Curve(curve, 1.0), _at(x, np.float64), elements=1, seed=seed)
    assert right.worst <= 1e-6
    for factor in (0.0, 0.5):
        with pytest.raises(AssertionError, match=r"Curve: gradient of input 0.* is off"):
            check_layer_grad(Curve(curve, factor), _at(x, np.float64), elements=1, seed=seed)


class Float32Kernel(Curve):
    """The leaky ReLU from a table of float32 kernels, refusing float64 as ``refuse`` says."""

    def __init__(self, refuse: str) -> None:
        super().__init__(leaky(), 1.0)
        self.refuse = refuse

    def _forward(self, x):
        v = x.value
        if v.dtype != np.float32:
            if self.refuse == "key":
                return {np.dtype(np.float32): self.f}[v.dtype](v)
            if self.refuse == "assert":
                assert v.dtype == np.float32, "float32 only"
            raise {"not implemented": NotImplementedError, "runtime": RuntimeError}[self.refuse]
        return self.f(v)


@pytest.mark.parametrize("refuse", ["key", "assert", "not implemented", "runtime"])
def test_a_layer_refusing_float64_by_any_error_cannot_be_judged_across_a_kink(refuse):
    """Its refusal (a KeyError, an AssertionError ...) came out of the check as the verdict on
    a right gradient; refused by a TypeError or a ValueError it was told it cannot be judged."""
    with pytest.raises(ValueError, match=r"cannot be judged in float32: f bends within the step"):
        check_layer_grad(Float32Kernel(refuse), _at(0.3 - 2e-4), elements=1)
    assert check_layer_grad(Float32Kernel(refuse), _at(0.25), elements=1).worst <= 2e-2


class Inside32(Curve):
    """``f`` computed on the input rounded to float32, handed back in the input's dtype."""

    def _forward(self, x):
        return self.f(x.value.astype(np.float32)).astype(x.value.dtype)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("x", [0.2, 0.5, 0.9])
def test_a_layer_rounding_to_float32_inside_gets_no_float64_comparison(x, seed):
    """Its float64 output holds float32's values: float64's step of 1e-6 moves 10 + x**2 by
    less than float32's spacing there, and the float64 comparison, seeing no derivative at
    all, passed a backward that added nothing, which the float32 comparison had failed."""
    square = (lambda v: 10 + v * v, lambda v: 2 * v)
    assert check_layer_grad(Inside32(square, 1.0), _at(x), elements=1, seed=seed).worst <= 2e-2
    with pytest.raises(AssertionError, match=r"Inside32: gradient of input 0.* is off"):
        check_layer_grad(Inside32(square, 0.0), _at(x), elements=1, seed=seed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("factor", [0.5, 0.0, -1.0, 1.05])
def test_a_layer_computing_in_float32_only_fails_a_wrong_gradient_on_a_curve(factor, seed):
    """tanh(3 x) bends within float32's step as a curve does: its one-sided slopes part by
    more than rounding, but a derivative outside both is no kink's. Every wrong backward
    here was told it cannot be judged there ("a kink?")."""
    tanh = (lambda v: np.tanh(3 * v), lambda v: 3 / np.cosh(3 * v) ** 2)
    right = Curve(tanh, 1.0, dtype=np.float32)
    assert check_layer_grad(right, _at(0.3), elements=1, seed=seed).worst <= 2e-2
    with pytest.raises(AssertionError, match=r"Curve: gradient of input 0.* is off"):
        check_layer_grad(Curve(tanh, factor, dtype=np.float32), _at(0.3), elements=1, seed=seed)


#: (the layer, why it has no float64 comparison) across the leaky ReLU's kink
NO_FLOAT64 = [
    (lambda: Curve(leaky(), 1.0, dtype=np.float32), "given float64 values its output is float32"),
    (
        lambda: Float32Kernel("not implemented"),
        "given float64 values it raised NotImplementedError",
    ),
    (lambda: Inside32(leaky(), 1.0), "it rounds input 0 to float32 inside"),
]


@pytest.mark.parametrize("make, why", NO_FLOAT64, ids=["float32 output", "raises", "rounds"])
def test_a_gradient_that_cannot_be_judged_is_told_why_and_what_to_do(make, why):
    """Told to "check in float64", a layer with no float64 comparison could not: its output
    stays float32, or it refuses float64, or it rounds to float32 inside."""
    with pytest.raises(ValueError) as refused:
        check_layer_grad(make(), _at(0.3 - 2e-4), elements=1)
    said = str(refused.value)
    assert f"no float64 comparison ({why}" in said
    assert said.endswith(
        "check it where the step crosses no kink (another seed or other inputs), or let it "
        "compute in float64"
    )


class Float32Only(Curve):
    """The leaky ReLU, refusing float64 with a RuntimeError of ``said``."""

    def __init__(self, said: str) -> None:
        super().__init__(leaky(), 1.0)
        self.said = said

    def _forward(self, x):
        if x.value.dtype != np.float32:
            raise RuntimeError(self.said)
        return self.f(x.value)


@pytest.mark.parametrize(
    "said, named",
    [
        ("float32 only:\n  no float64 kernel\n", "RuntimeError: float32 only: no float64 kernel"),
        ("   ", "RuntimeError"),
    ],
    ids=["lines", "blank"],
)
def test_a_refusal_of_float64_is_named_on_one_line_in_the_sentence(said, named):
    """The refusal's own line breaks cut the sentence that quotes it, and a blank one left
    ``RuntimeError:`` with nothing after it."""
    with pytest.raises(ValueError) as refused:
        check_layer_grad(Float32Only(said), _at(0.3 - 2e-4), elements=1)
    assert f"no float64 comparison (given float64 values it raised {named}): " in str(refused.value)
