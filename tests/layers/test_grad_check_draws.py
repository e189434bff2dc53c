"""The gradient checks run a layer that draws through distconv's seam as it trains, and pin its
draws: every forward of one check draws the same numbers, so finite differences judge it."""

from __future__ import annotations

import re

import numpy as np
import pytest

from distconv import Arg
from distconv.finite_differences import Objective
from distconv.float64_redo import AnotherFunction, another_function
from distconv.gradient_check import check_layer_grad, check_network_grad
from distconv.layers import Dropout, FullyConnected
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target, values_of
from distconv.layers.randomness import step_generator
from tests.layers.drawing_layers import Drawn, Jitter, PreviousMask, Shifted, StaleMask
from tests.layers.test_grad_check_own_layers import feeds, network


def _trained(layer: Jitter) -> list:
    """What the layer drew at each forward of a check but the two decoys (the first forward,
    and the one before the first backward's): the same numbers each time, and others than
    either decoy's."""
    drawn = [n for n in layer.drawn if n is not None]
    assert len(drawn) > 3 and len(drawn) == len(layer.drawn)  # every forward trained
    pinned = [n for n in drawn if np.array_equal(n, drawn[1])]
    decoys = [n for n in drawn if not np.array_equal(n, drawn[1])]
    assert len(decoys) == 2 and decoys[0] is drawn[0]
    for decoy in decoys:
        assert not np.isclose(decoy, pinned[0]).any()
    assert not np.isclose(*decoys).any()
    return pinned


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_layer_drawing_from_the_step_is_checked_training_and_a_wrong_one_fails(rng, dtype):
    """Before, the checks ran outside any step: the layer was the identity there, and a
    backward that forgot its noise passed both checks."""
    x = Arg(rng.standard_normal((4, 6)).astype(dtype), needs_grad=True)
    right = Jitter()
    assert check_layer_grad(right, [x]).worst < (1e-6 if dtype == np.float64 else 2e-2)
    _trained(right)
    with pytest.raises(AssertionError, match=r"gradient of input 0(\[.*\])? is off"):
        check_layer_grad(Jitter(wrong=True), [x])


def test_a_network_drawing_from_the_step_is_checked_training_and_a_wrong_one_fails(rng):
    right = Jitter()
    assert check_network_grad(network(right), feeds(rng), inputs=True).worst < 1e-6
    _trained(right)
    with pytest.raises(AssertionError, match=r"is off"):
        check_network_grad(network(Jitter(wrong=True)), feeds(rng), inputs=True)


def test_the_check_seed_chooses_the_draws():
    x = Arg(np.linspace(-1.0, 1.0, 24).reshape(4, 6), needs_grad=True)
    layers = [Jitter(), Jitter(), Jitter()]
    for layer, seed in zip(layers, (0, 0, 1)):
        check_layer_grad(layer, [x], seed=seed)
    same, again, other = (_trained(layer)[0] for layer in layers)
    np.testing.assert_array_equal(again, same)
    assert not np.isclose(other, same).any()


def _near_kinks(shape: tuple, near: int) -> np.ndarray:
    """float32 normals with the first ``near`` rows within float32's step of 1e-3 of a ReLU's
    kink (2e-4), where a float32 comparison fails and is made again in float64."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x[:near] = 2e-4
    return x


#: what the float64 redo of a layer drawing in its input's dtype says, on one line
ANOTHER = (
    r"its float64 redo computes another function than the float32 one \(its output moved by "
    r"[0-9.e-]+ of its size at the same point, where rounding in float32 explains at most "
    r"[0-9.e-]+: a "
    r"layer drawing in its input's dtype, or a path taken in float64 only\): draw in a dtype "
    r"that does not follow the input's \(float32 uniforms, float64 normals cast\), or check "
    r"it in float64$"
)


def test_at_a_kink_in_float32_draws_in_the_input_s_dtype_cannot_be_judged_by_float64():
    """What architecture.md says a layer of one's own must mind: a float32 comparison across a
    ReLU's kink is made again in float64, which draws other numbers where the layer draws in
    its input's dtype; a right layer was called off on the redo's word ("analytic 10.88,
    numeric 11.58"). The check now sees the redo's output move beyond rounding and says so.
    Drawn in float64 and cast, it passes."""
    x = _near_kinks((4, 6), near=1)
    assert check_layer_grad(Drawn(in_input_dtype=False), [Arg(x, needs_grad=True)]).worst < 2e-2
    with pytest.raises(ValueError, match=r"cannot be judged in float32: f bends") as caught:
        check_layer_grad(Drawn(in_input_dtype=True), [Arg(x, needs_grad=True)])
    assert re.search(ANOTHER, str(caught.value)) and "\n" not in str(caught.value)
    wide = Arg(x.astype(np.float64), needs_grad=True)  # in float64 alone it is judged right
    assert check_layer_grad(Drawn(in_input_dtype=True), [wide]).worst < 1e-6


def test_the_redo_compares_the_terms_of_f_not_f_whose_sum_cancels_them(rng):
    """Under r's random signs the moves of many outputs cancel in f: over 2 million outputs of
    the layer drawing in its input's dtype, f moved by 1300 times float32's rounding of it,
    within what rounding may explain, its terms by 950000 times. Here they cancel exactly."""
    x = rng.standard_normal((4, 6)).astype(np.float32)
    obj = Objective(Drawn(in_input_dtype=False), [Arg(x, needs_grad=True)], rng)
    narrow, r = obj._output().astype(np.float64), obj.r.astype(np.float64)
    size = np.abs(narrow * r)
    wide = narrow + 0.05 * (size - size.mean()) / r  # terms move by 5% of their mean, f by 0
    assert abs(np.sum(wide * r) - np.sum(narrow * r)) < obj.rounding
    with pytest.raises(AnotherFunction, match=r"moved by 0\.0[1-9][0-9]* of its size"):
        another_function(obj, narrow, wide)
    another_function(obj, narrow, narrow * (1 + 8 * np.finfo(np.float32).eps))  # rounding's


def test_a_wrong_layer_drawing_in_its_input_s_dtype_is_off_on_float32_s_word():
    """Away from a kink the float32 comparison alone can tell: its verdict stands, and the
    message says why float64 did not judge it."""
    x = _near_kinks((4, 6), near=0)
    with pytest.raises(AssertionError, match=r"is off: .* judged in float32, as " + ANOTHER):
        check_layer_grad(Drawn(in_input_dtype=True, wrong=True), [Arg(x, needs_grad=True)])


def test_outputs_all_0_in_float32_that_the_redo_moves_are_told_not_divided_by():
    """Every ReLU of a layer drawing in its input's dtype just below its kink: its float32
    outputs are all 0, so their size is too, and the redo's message divided by it
    (ZeroDivisionError out of the check, which said nothing of the layer)."""
    x = Shifted.below_kinks((4, 6))
    with pytest.raises(ValueError, match=r"cannot be judged in float32: f bends") as caught:
        check_layer_grad(Shifted(), [Arg(x, needs_grad=True)])
    said = str(caught.value)
    assert "another function than the float32 one (its output moved by " in said
    assert " from all 0 at the same point" in said and "\n" not in said


def test_the_redo_of_a_right_layer_whose_outputs_cancel_is_no_other_function():
    """Rounding scales with what is added up, not with the outputs: a float32 fully connected
    layer on inputs about 1e4, its bias taking that off, has outputs about 1, rounded as sums
    of 1e4. Its float64 redo moved their terms by up to 9000 eps of their size, beyond the
    bound of sqrt(eps) of it, and the right layer was refused as one whose redo computes
    another function. A nudge of its values by a rounding moves them alike: judged."""
    rng = np.random.default_rng(1)
    fc = FullyConnected(16, 8, act="relu", dtype=np.float32)
    w = (rng.standard_normal(fc.weight.value.shape) * np.sqrt(2 / 16)).astype(np.float32)
    fc.weight.value[...] = w
    x = (1e4 + rng.standard_normal((6, 16))).astype(np.float32)
    fc.bias.value[...] = (-1e4 * w.sum(axis=1)).astype(np.float32)
    assert check_layer_grad(fc, [Arg(x, needs_grad=True)]).worst < 2e-2


def test_a_backward_that_keeps_the_mask_of_its_first_forward_fails_both_checks(rng):
    """Every forward of a check draws the same mask, so a backward using the first forward's
    passed both checks, though it is wrong at every step of a training after the first. The
    check's first forward now draws other numbers (a decoy) where a layer drew."""
    x = Arg(rng.standard_normal((5, 8)), needs_grad=True)
    with pytest.raises(AssertionError, match=r"gradient of input 0(\[.*\])? is off"):
        check_layer_grad(StaleMask(), [x])
    with pytest.raises(AssertionError, match=r"is off"):
        check_network_grad(network(StaleMask()), feeds(rng), inputs=True)
    assert check_layer_grad(Dropout(0.5), [x]).worst < 1e-6
    assert check_network_grad(network(Dropout(0.5)), feeds(rng), inputs=True).worst < 1e-6


def test_a_backward_that_uses_the_mask_of_the_forward_before_its_latest_fails_both(rng):
    """After the decoy, the check's forwards before its first backward draw the same mask, so
    a backward using the mask of the forward before the latest passed both checks, though
    the docs said a backward using an earlier forward's mask fails them. A second decoy, just
    before the first backward's forward, tells it."""
    x = Arg(rng.standard_normal((5, 8)), needs_grad=True)
    with pytest.raises(AssertionError, match=r"gradient of input 0(\[.*\])? is off"):
        check_layer_grad(PreviousMask(), [x])
    with pytest.raises(AssertionError, match=r"is off"):
        check_network_grad(network(PreviousMask()), feeds(rng), inputs=True)


class Spawning(Jitter):
    """:class:`Jitter` drawing from a child of the step's generator (``spawn``), which leaves
    the generator's state as it was."""

    def _forward(self, x: Arg):
        v = values_of(self, x)
        self.noise = step_generator().spawn(1)[0].standard_normal(v.shape).astype(v.dtype)
        self.drawn.append(self.noise)
        return v * (1 + self.noise / 10)


def test_a_layer_drawing_from_a_spawned_child_is_seen_to_draw(rng):
    """The checks told a draw by the step generator's state, which spawning a child leaves as
    it was: the decoy's output was taken for the first forward's, and a wrong layer was said
    to be random ("the output changed between two forwards"), told to draw from
    step_generator(), which it did. Its decoys are made as for any layer that draws."""
    x = Arg(rng.standard_normal((4, 6)), needs_grad=True)
    right = Spawning()
    assert check_layer_grad(right, [x]).worst < 1e-6
    _trained(right)
    with pytest.raises(AssertionError, match=r"gradient of input 0(\[.*\])? is off"):
        check_layer_grad(Spawning(wrong=True), [x])


class Doubled(Layer):
    """``y = 2 x``, drawing nothing; ``forwards`` counts its forwards."""

    def __init__(self) -> None:
        super().__init__()
        self.forwards = 0

    def _forward(self, x: Arg):
        self.forwards += 1
        return values_of(self, x) * 2

    def _backward(self, dz, callback):
        if (dx := grad_target(self.inputs[0])) is not None:
            dx += 2 * dz


def test_the_decoys_cost_two_forwards_and_only_where_a_layer_drew(rng):
    """The same check of two linear layers, one drawing: two forwards more for it."""
    x = Arg(rng.standard_normal((5, 8)), needs_grad=True)
    drawing, still = Jitter(), Doubled()
    check_layer_grad(drawing, [x])
    check_layer_grad(still, [x])
    assert len(drawing.drawn) == still.forwards + 2
