"""The gradient checker itself: it must fail a layer whose callback fires too early."""

import numpy as np
import pytest

from distconv import Arg, Parameter
from distconv.gradient_check import check_layer_grad
from distconv.layers import Activation, FullyConnected, Mixed
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target
from distconv.layers.projection import FullMatrixProjection

F64 = np.float64


class EarlyFiringFC(FullyConnected):
    """Fires the weight's callback before adding the weight gradient: wrong, yet once a pass."""

    def _backward(self, dz, callback):
        x = self.inputs[0]
        self.weight.inc_update(callback)
        self.weight.grad += dz.T @ self._flat(x)
        dx = grad_target(x)
        if dx is not None:
            dx += dz @ self.weight.value


def test_a_callback_before_the_gradient_is_complete_fails(rng):
    layer = EarlyFiringFC(3, 2, bias=False, dtype=F64)
    with pytest.raises(AssertionError, match="fired its callback before its gradient"):
        check_layer_grad(layer, [Arg(rng.standard_normal((4, 3)))])


def test_a_weight_shared_inside_one_layer_fires_once_after_both_uses(rng):
    w = Parameter("w", rng.standard_normal((2, 3)))
    layer = Mixed([FullMatrixProjection(3, 2, weight=w), FullMatrixProjection(3, 2, weight=w)])
    x = [Arg(rng.standard_normal((4, 3))), Arg(rng.standard_normal((4, 3)))]
    assert "param w" in check_layer_grad(layer, x).diffs


def test_a_bfloat16_layer_is_told_to_cast_not_given_numpys_finfo_error(rng):
    """np.finfo does not know ml_dtypes' types: the check said "data type ... not inexact"."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    layer = Mixed([FullMatrixProjection(3, 2)])
    for p in layer.parameters():
        p.cast(ml_dtypes.bfloat16)
    x = Arg(rng.standard_normal((4, 3)).astype(ml_dtypes.bfloat16), needs_grad=True)
    with pytest.raises(TypeError, match=r"its output is bfloat16; finite differences need numpy"):
        check_layer_grad(layer, [x])


class NoGradientProjection(FullMatrixProjection):
    """Adds no gradient at all, to the weight or the input: as wrong as a backward can be."""

    def _backward(self, input, dout):
        pass


def test_a_float16_layer_is_refused_not_passed_with_no_gradient_at_all(rng):
    """In float16 the rounding of f outweighs the step, and the check passed this layer."""
    layer = Mixed([NoGradientProjection(32, 16, dtype=np.float16)], dtype=np.float16)
    x = Arg(rng.standard_normal((64, 32)).astype(np.float16))
    with pytest.raises(TypeError, match=r"its output is float16; finite differences need numpy"):
        check_layer_grad(layer, [x])
    for p in layer.parameters():
        p.cast(np.float32)
    x.value = x.value.astype(np.float32)
    with pytest.raises(AssertionError, match="gradient of .* is off"):  # float32 catches it
        check_layer_grad(layer, [x])


def test_a_bfloat16_weight_under_a_float32_output_is_refused_not_called_wrong(rng):
    """ml_dtypes' products return float32, so a bfloat16 FullyConnected outputs float32; the
    check then perturbed its bfloat16 weight by a step it rounds away and called the right
    gradient off (an AssertionError blaming the layer)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    layer = FullyConnected(32, 16, dtype=ml_dtypes.bfloat16)
    x = Arg(rng.standard_normal((64, 32)).astype(ml_dtypes.bfloat16))
    assert layer(x).value.dtype == np.float32
    with pytest.raises(TypeError, match=r"param FullyConnected.weight is bfloat16; finite diff"):
        check_layer_grad(layer, [x])


@pytest.mark.parametrize("weight, data", [(np.float32, np.float64), (np.float64, np.float32)])
def test_a_float32_array_under_a_float64_output_takes_float32s_step(rng, weight, data):
    """numpy promotes a float32 weight and a float64 input to a float64 output; the check took
    float64's step (1e-6) and tolerance for every array, float32's rounding of the step moved f
    by 1e-4 of the derivative, and a right gradient was called off."""
    layer = FullyConnected(32, 16, dtype=weight)
    x = Arg(rng.standard_normal((64, 32)).astype(data), needs_grad=True)
    assert layer(x).value.dtype == np.float64
    report = check_layer_grad(layer, [x])
    assert report.diffs["param FullyConnected.bias"] < 2e-2
    wrong = Mixed([NoGradientProjection(32, 16, dtype=weight)], dtype=weight)
    with pytest.raises(AssertionError, match="gradient of .* is off"):  # still no free pass
        check_layer_grad(wrong, [x])


class TwiceLayer(Layer):
    """``y = 2 x``, its backward saying ``factor * dy`` (and NaN at one entry, if asked)."""

    def __init__(self, factor=2.0, nan_at_first=False):
        super().__init__()
        self.factor, self.nan_at_first = factor, nan_at_first

    def _forward(self, x):
        return 2 * x.value

    def _backward(self, dz, callback):
        g = self.factor * dz
        if self.nan_at_first:
            g.reshape(-1)[0] = np.nan
        grad_target(self.inputs[0])[...] += g


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf in the differences
def test_a_wrong_gradient_is_not_passed_because_the_output_is_not_finite(rng):
    """An inf input made f inf, every numeric derivative NaN, and each comparison with NaN
    False: the check passed a backward 1.5 times too large, reporting NaN."""
    x = rng.standard_normal((3, 4))
    assert check_layer_grad(TwiceLayer(), [Arg(x)]).worst < 1e-6
    with pytest.raises(AssertionError, match="gradient of .* is off"):
        check_layer_grad(TwiceLayer(factor=3.0), [Arg(x)])
    x[1, 2] = np.inf
    with pytest.raises(ValueError, match=r"TwiceLayer: input 0 holds NaN or inf; finite diff"):
        check_layer_grad(TwiceLayer(factor=3.0), [Arg(x)])
    layer = FullyConnected(4, 2, dtype=F64)
    layer.bias.value[1] = np.nan
    with pytest.raises(ValueError, match=r"param FullyConnected.bias holds NaN or inf"):
        check_layer_grad(layer, [Arg(rng.standard_normal((3, 4)))])


def test_a_gradient_that_is_not_finite_is_named_not_blamed_on_a_callback(rng):
    """No parameter fired, yet the message said a gradient was computed from a parameter after
    its callback fired (fired: [])."""
    with pytest.raises(AssertionError, match=r"TwiceLayer: the gradient of input 0 is not finite$"):
        check_layer_grad(TwiceLayer(nan_at_first=True), [Arg(rng.standard_normal((3, 4)))])


class NanWeightGradient(FullyConnected):
    """A backward that makes its weight gradient NaN at one entry before the callback fires."""

    def _backward(self, dz, callback):
        self.weight.grad[0, 0] = np.nan
        super()._backward(dz, callback)


def test_a_weight_gradient_that_is_not_finite_is_named_not_blamed_on_its_callback(rng):
    """A NaN in a parameter's gradient from backward itself compared unequal to itself (NaN !=
    NaN), and the check said the parameter fired its callback before its gradient was complete
    (more was added to it afterwards), though nothing was added. Nor is it
    blamed on a read after the callback fired ('computed from a parameter after its callback
    fired?'): without the callback's NaN values backward makes it all the same."""
    layer = NanWeightGradient(4, 2, dtype=F64)
    with pytest.raises(AssertionError, match=r"the gradient of param .*\.weight is not finite$"):
        check_layer_grad(layer, [Arg(rng.standard_normal((3, 4)))])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # -inf * 0 in the weight's gradient
def test_an_inf_input_that_leaves_the_output_finite_is_named_when_a_gradient_is_not(rng):
    """A -inf input under a ReLU that turns its unit off leaves the output finite, so the
    check went on; the weight's gradient, -inf * 0, was NaN, and a callback was blamed ('computed
    from a parameter after its callback fired') where the input holds the inf.
    A -inf that leaves output and gradients finite, under a softmax, is checked as before."""
    layer = FullyConnected(4, 1, act="relu", dtype=F64)
    layer.weight.value[...] = np.abs(layer.weight.value) + 0.1  # -inf in, -inf out: ReLU off
    x = rng.standard_normal((3, 4))
    x[1, 2] = -np.inf
    with pytest.raises(ValueError, match=r"FullyConnected: input 0 holds NaN or inf; finite"):
        check_layer_grad(layer, [Arg(x, needs_grad=True)])
    assert check_layer_grad(Activation("softmax"), [Arg(x, needs_grad=True)]).worst < 1e-6


class SqrtLayer(Layer):
    """``y = sqrt(x)``, its backward saying 0 where ``x`` is 0 (there is no derivative)."""

    def _forward(self, x):
        return np.sqrt(x.value)

    def _backward(self, dz, callback):
        x = self.inputs[0].value
        grad_target(self.inputs[0])[...] += np.where(x > 0, dz / (2 * np.sqrt(x) + (x == 0)), 0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # sqrt of x - step < 0
def test_a_numeric_derivative_that_is_nan_fails_though_the_output_is_finite(rng):
    """f is finite at x, NaN a step away (sqrt at 0): the difference was NaN, `diff > tol`
    False, and the check passed; 436cf9d's `not diff <= tol` was tested by no test, its
    finite-output refusal answering first in both of its own."""
    x = np.abs(rng.standard_normal((2, 3))) + 0.5
    assert check_layer_grad(SqrtLayer(), [Arg(x, needs_grad=True)]).worst < 1e-6
    x[0, 1] = 0.0
    with pytest.raises(AssertionError, match=r"gradient of input 0 is off: .*difference nan"):
        check_layer_grad(SqrtLayer(), [Arg(x, needs_grad=True)])


class ShiftLayer(Layer):
    """``y = scale * x + b``, its backward adding ``factor`` times the bias gradient."""

    def __init__(self, width, dtype, factor=1.0, scale=1e4):
        super().__init__()
        self.b = self.new_param("b", np.zeros(width, dtype))
        self.factor, self.scale = factor, scale

    def _forward(self, x):
        return self.scale * x.value + self.b.value

    def _backward(self, dz, callback):
        if not self.b.static:
            self.b.grad += self.factor * dz.sum(0)
        self.b.inc_update(callback)


@pytest.mark.parametrize("factor", [0.0, 0.5, 1.0])
def test_a_float32_gradient_within_the_outputs_rounding_is_not_passed(rng, factor):
    """Under a large float32 output the rounding floor (0.06 |f|) was above the bias's whole
    gradient, and a backward that added nothing to it, or half of it, passed.
    Such a gradient cannot be judged: refused, naming it; in float64 it is judged."""
    x = rng.standard_normal((16, 4))
    with pytest.raises(ValueError, match=r"param ShiftLayer.b cannot be judged in float32"):
        check_layer_grad(
            ShiftLayer(4, np.float32, factor), [Arg(x.astype(np.float32), needs_grad=False)]
        )
    if factor == 1.0:
        assert check_layer_grad(ShiftLayer(4, F64, factor), [Arg(x, needs_grad=False)]).worst < 1e-6
    else:
        with pytest.raises(AssertionError, match=r"gradient of param ShiftLayer.b is off"):
            check_layer_grad(ShiftLayer(4, F64, factor), [Arg(x, needs_grad=False)])


@pytest.mark.parametrize("factor", [0.5, 1.0])
def test_a_float32_gradient_above_the_floor_is_judged_not_refused(rng, factor):
    """The rounding-noise estimate bounds the worst case and grows with the count of
    outputs: a float32 FC on 512 rows of inputs of scale 30, whose bias derivatives agreed to
    1e-3, was refused as unjudgeable. Above the floor from |f| a gradient is
    judged on its own scale: a right one passes, a wrong one fails.

    The FC's weights come from ``rng``, not the initialisers' global generator: the bias's
    derivative along the gradient (288) is always below the noise bound (about 320), so it is
    judged only where |f| puts the floor below it, and 4 of 40 global draws did not (the test
    failed after tests/sync/test_local_state.py). Here the floor is 98."""
    x = (30 * rng.standard_normal((512, 16))).astype(np.float32)
    layer = ShiftLayer(16, np.float32, factor, scale=1.0)
    if factor == 1.0:
        fc = FullyConnected(16, 16)
        fc.weight.value[...] = rng.standard_normal((16, 16)) * np.sqrt(2 / 16)
        assert check_layer_grad(fc, [Arg(x)]).worst < 0.02
        assert check_layer_grad(layer, [Arg(x, needs_grad=False)]).worst < 0.02
    else:
        with pytest.raises(AssertionError, match=r"gradient of param ShiftLayer.b is off"):
            check_layer_grad(layer, [Arg(x, needs_grad=False)])


@pytest.mark.parametrize(
    "kw",
    [
        {"tol": 0},
        {"tol": 0.0},
        {"tol": -1e-6},
        {"tol": float("nan")},
        {"tol": float("inf")},
        {"tol": True},
        {"step": 0},
        {"step": -1e-6},
        {"step": float("nan")},
        {"step": float("inf")},
        {"step": "1e-6"},
        {"elements": -1},
        {"elements": 1.5},
    ],
)
def test_a_step_tol_or_elements_out_of_range_is_refused_naming_it(rng, kw):
    """step=0 and tol=0 were replaced by the dtype's defaults without a word (``step or 1e-6``),
    tol=inf passed any gradient, a negative or NaN tol failed every right one as "off", and
    elements=-1 was numpy's "negative dimensions are not allowed"."""
    (name,) = kw
    layer = FullyConnected(3, 2, dtype=F64)
    with pytest.raises(ValueError, match=rf"^{name} must "):
        check_layer_grad(layer, [Arg(rng.standard_normal((4, 3)), needs_grad=True)], **kw)


class OffsetLayer(Layer):
    """``y = x + b``, its backward adding ``factor`` times the bias gradient."""

    def __init__(self, width, dtype, factor=1.0, offset=0.0):
        super().__init__()
        self.b = self.new_param("b", np.full(width, offset, dtype))
        self.factor = factor

    def _forward(self, x):
        return x.value + self.b.value

    def _backward(self, dz, callback):
        if not self.b.static:
            self.b.grad += self.factor * dz.sum(0)
        self.b.inc_update(callback)
        dx = grad_target(self.inputs[0])
        if dx is not None:
            dx += dz


@pytest.mark.parametrize("offset", [1000.0, 3000.0, 5000.0])
def test_a_float32_step_rounded_in_large_values_is_taken_as_rounded(rng, offset):
    """A float32 bias of -3000 moved by 1e-3 moves by 9.8e-4 (its spacing is 2.4e-4): the
    difference was divided by the step asked for, 2 % too large, and a right gradient was
    called off ("relative difference 0.0337 > 0.02"); the inputs near +3000 as well. The
    derivative is now taken along the step each entry really took; a wrong one still fails."""
    x = (offset + rng.standard_normal((4, 16))).astype(np.float32)
    right = OffsetLayer(16, np.float32, offset=-offset)
    assert check_layer_grad(right, [Arg(x, needs_grad=True)], elements=16).worst < 0.02
    wrong = OffsetLayer(16, np.float32, factor=0.9, offset=-offset)
    with pytest.raises(AssertionError, match=r"gradient of param OffsetLayer.b.* is off"):
        check_layer_grad(wrong, [Arg(x, needs_grad=False)])


def test_a_step_lost_in_rounding_is_refused_naming_the_array(rng):
    """float32's spacing at 1e5 is 0.0078: a step of 1e-3 leaves the bias as it is, and the
    right gradient was called off (numeric 0); given a step it holds, it is judged."""
    x = rng.standard_normal((4, 16)).astype(np.float32)
    with pytest.raises(ValueError, match=r"step 0.001 is lost rounding param OffsetLayer.b"):
        check_layer_grad(OffsetLayer(16, np.float32, offset=1e5), [Arg(x, needs_grad=False)])
    layer = OffsetLayer(16, np.float32, offset=1e5)
    assert check_layer_grad(layer, [Arg(x, needs_grad=False)], step=0.5).worst < 0.02


def test_the_docstring_names_the_step_lost_in_rounding_and_the_rounded_step():
    """check_layer_grad refuses a step that rounding loses and takes the derivative along the
    step as rounded, but its docstring's Raises listed neither that ValueError
    nor, under ``step``, the rounding."""
    doc = " ".join(check_layer_grad.__doc__.split())
    args, raises = doc.split("Raises:")
    assert "``step`` lost rounding an entry to its array's dtype" in raises.split("TypeError")[0]
    assert "as rounded to its array's dtype" in args.split("tol:")[0]


class ScaleLayer(Layer):
    """``y = w * x``, one weight per column; ``wrong`` names what its backward gets wrong
    while every gradient of a pass stays right."""

    def __init__(self, width, wrong=None):
        super().__init__()
        self.w = self.new_param("w", np.linspace(0.5, 1.5, width))
        self.wrong = wrong

    def _forward(self, x):
        return x.value * self.w.value

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None and not (self.wrong == "drops dx when static" and self.w.static):
            dx += dz * self.w.value
        if not self.w.static:
            self.w.grad += (dz * self.inputs[0].value).sum(axis=0)
        if self.wrong != "never fires":
            self.w.inc_update(callback)
        if self.wrong == "fires twice" or (self.wrong == "fires when static" and self.w.static):
            callback(self.w)  # by hand: inc_update would not fire a static parameter


@pytest.mark.parametrize(
    "wrong, said",
    [
        (None, None),
        ("fires twice", r"parameter ScaleLayer.w fired its callback 2 times in 1 passes"),
        ("never fires", r"parameter ScaleLayer.w fired its callback 0 times in 1 passes"),
        ("drops dx when static", r"input 0 changed when the parameters were static"),
        ("fires when static", r"static parameters fired callbacks: \{'ScaleLayer.w': 1\}"),
    ],
)
def test_callback_counts_and_the_static_pass_are_checked(rng, wrong, said):
    """The checker's points 3 and 4 (a callback once a pass; the same input gradients with
    every parameter static) had no test: with either check gone every layer test still
    passed, so a layer that fired twice, or never, or dropped its input gradient when its
    weights were frozen passed them too."""
    x = Arg(rng.standard_normal((3, 4)))
    if said is None:
        assert check_layer_grad(ScaleLayer(4), [x]).worst < 1e-6
        return
    with pytest.raises(AssertionError, match=said):
        check_layer_grad(ScaleLayer(4, wrong), [x])
