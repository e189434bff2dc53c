"""The gradient checks on layers of one's own written as a contributor would: mistakes that
once passed a check, or failures whose message did not say what was wrong."""

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.gradient_check import check_layer_grad, check_network_grad
from distconv.layers import Activation, Concatenate, FullyConnected, SoftmaxCrossEntropy
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target

F64 = np.float64


class Dropout(Layer):
    """Inverted dropout, its mask drawn from its own generator at each forward unless
    ``fixed`` (then drawn once and reused)."""

    def __init__(self, p: float = 0.5, fixed: bool = False) -> None:
        super().__init__()
        self.p, self.fixed, self.gen, self.mask = p, fixed, np.random.default_rng(7), None

    def _forward(self, x):
        if self.mask is None or not self.fixed:
            self.mask = (self.gen.random(x.value.shape) >= self.p) / (1 - self.p)
        return x.value * self.mask

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None:
            dx += dz * self.mask


class Drifting(Layer):
    """``y = x * (1 + calls / 1000)``: the output depends on how many forwards came before."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def _forward(self, x):
        self.calls += 1
        return x.value * (1 + self.calls / 1000)

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None:
            dx += dz * (1 + self.calls / 1000)


def network(layer: Layer) -> Network:
    """``layer`` between an FC of 4 to 4 and an FC of 4 to 3 under a softmax cross-entropy."""
    net = Network()
    net.add("fc1", FullyConnected(4, 4, dtype=F64), "x")
    net.add("own", layer, "fc1")
    net.add("fc2", FullyConnected(4, 3, dtype=F64), "own")
    net.add("loss", SoftmaxCrossEntropy(), ["fc2", "label"])
    return net


def feeds(rng) -> dict:
    return {"x": Arg(rng.standard_normal((5, 4))), "label": Arg(ids=np.arange(5) % 3)}


CHANGED = r"the output changed between two forwards at the same inputs and parameters"


@pytest.mark.parametrize("make", [Dropout, Drifting])
def test_an_output_that_changes_between_forwards_is_refused_saying_so(rng, make):
    """A fresh dropout mask per forward gave "gradient of input 0 is off: analytic 23.26,
    numeric 35697831.7", though its backward was right; so did state kept from the last
    forward. Both checks now say that the output changed, and how to go on."""
    x = Arg(rng.standard_normal((4, 6)), needs_grad=True)
    with pytest.raises(ValueError, match=CHANGED + r" \(f .*random, .*draw the random part"):
        check_layer_grad(make(), [x])
    with pytest.raises(ValueError, match=r"^network \(loss 'loss'\): " + CHANGED):
        check_network_grad(network(make()), feeds(rng), inputs=True)


def test_a_dropout_whose_mask_is_drawn_once_is_checked_and_a_wrong_one_fails(rng):
    """Made deterministic for the check, the layer is judged: right passes, a wrong one fails."""
    x = Arg(rng.standard_normal((4, 6)), needs_grad=True)
    assert check_layer_grad(Dropout(fixed=True), [x]).worst < 1e-6
    assert check_network_grad(network(Dropout(fixed=True)), feeds(rng)).worst < 1e-6

    class Unscaled(Dropout):
        def _backward(self, dz, callback):
            grad_target(self.inputs[0])[...] += dz * (self.mask > 0)

    with pytest.raises(AssertionError, match=r"gradient of input 0 is off"):
        check_layer_grad(Unscaled(fixed=True), [x])


class Gains(Layer):
    """``y = x * w``, one weight per feature; ``assigns`` sets its gradient (``[...] =``)
    instead of adding into it."""

    def __init__(self, n: int, assigns: bool = False) -> None:
        super().__init__()
        self.w = self.new_param("w", np.linspace(0.5, 1.5, n))
        self.assigns = assigns

    def _forward(self, x):
        return x.value * self.w.value

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None:
            dx += dz * self.w.value
        if not self.w.static:
            g = (dz * self.inputs[0].value).sum(0)
            if self.assigns:
                self.w.grad[...] = g
            else:
                self.w.grad += g
        self.w.inc_update(callback)


ADD = r"backward twice did not double the gradient: add \(\+=\) into p.grad and arg.grad, never"


def test_a_gradient_assigned_instead_of_added_fails_both_checks_saying_to_add(rng):
    """Right for one pass, so check_network_grad passed it, and every run did: with
    accumulate=2 a weight ended 7e-3 off. check_layer_grad caught it as "did not double the
    gradient", not saying why."""
    assert check_network_grad(network(Gains(4)), feeds(rng)).worst < 1e-6
    with pytest.raises(AssertionError, match=r"^network \(loss 'loss'\): param own.w: " + ADD):
        check_network_grad(network(Gains(4, assigns=True)), feeds(rng))
    x = Arg(rng.standard_normal((3, 4)))
    with pytest.raises(AssertionError, match=r"^Gains: param Gains.w: " + ADD):
        check_layer_grad(Gains(4, assigns=True), [x])


class Tied(Layer):
    """``y = w * (w * x)``, one weight registered under two keys (one per use), each use's
    gradient added unless ``guards`` is False (no ``if not p.static``)."""

    def __init__(self, n: int, guards: bool = True) -> None:
        super().__init__()
        self.w = self.new_param("w", np.linspace(0.5, 1.5, n))
        self.add_param("w_again", self.w)
        self.guards = guards

    def _forward(self, x):
        return x.value * self.w.value**2

    def _backward(self, dz, callback):
        x, w = self.inputs[0], self.w
        dx = grad_target(x)
        if dx is not None:
            dx += dz * w.value**2
        for _ in range(2):  # each use adds its share and counts as one user
            if self.guards and w.static:
                pass
            else:
                w.grad += (dz * x.value * w.value).sum(0)
            w.inc_update(callback)


def test_the_static_pass_says_that_it_froze_the_parameters_and_how_to_go_on(rng):
    """A correct layer with no ``if not p.static`` guard failed with "static parameter(s)
    ['Tied.w', 'Tied.w'] have no gradient (grad is None)" and numpy's "'NoneType' and
    'float'", though nothing had been frozen: the check freezes them all for its last pass,
    and did not say so. A weight registered twice was named twice."""
    x = Arg(rng.standard_normal((3, 4)))
    assert check_layer_grad(Tied(4), [x]).worst < 1e-6
    with pytest.raises(TypeError) as failed:
        check_layer_grad(Tied(4, guards=False), [x])
    said = str(failed.value)
    assert said.startswith(
        "Tied: check_layer_grad's static pass froze every parameter (['Tied.w']), and backward "
        "then added into a frozen one's gradient, which is None"
    ), said
    assert "if not p.static: p.grad += ...); check_layer_grad(..., check_static=False)" in said
    assert "NoneType" not in said
    assert check_layer_grad(Tied(4, guards=False), [x], check_static=False).worst < 1e-6


class KeepsItsWeight(Gains):
    """Gains that keeps its weight's array from ``__init__`` and computes with it, or, with
    ``adds_at_first``, reads ``p.value`` but adds 1 too many into its first entry's gradient."""

    def __init__(self, n: int, adds_at_first: bool = False) -> None:
        super().__init__(n)
        self.kept, self.adds_at_first = self.w.value, adds_at_first

    def _forward(self, x):
        return x.value * (self.w.value if self.adds_at_first else self.kept)

    def _backward(self, dz, callback):
        if self.adds_at_first:
            self.w.grad[0] += 1.0
        super()._backward(dz, callback)


KEEPS = (
    r"numeric 0, .*; the output does not depend on {}'s current value \(it stays when all of "
    r"it moves, and moves when the array it held moves in place\): does the layer keep an old "
    r"array \(self.w.value from __init__\) instead of reading p.value"
)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_layer_that_keeps_its_weight_s_array_is_asked_whether_it_does(rng, dtype):
    """Trained on, such a layer computes with a stale copy once the Trainer's dtype= cast or
    a sync replaces p.value, with no error; the checks said only "numeric 0"."""
    x = Arg(rng.standard_normal((3, 4)).astype(dtype), needs_grad=False)
    layer = KeepsItsWeight(4)
    layer.w.cast(dtype)
    layer.kept = layer.w.value
    with pytest.raises(AssertionError, match=KEEPS.format("KeepsItsWeight.w")):
        check_layer_grad(layer, [x])
    with pytest.raises(AssertionError, match=KEEPS.format("own.w")):
        check_network_grad(network(KeepsItsWeight(4)), feeds(rng))


def test_a_derivative_of_0_at_one_entry_of_a_weight_in_use_gets_no_such_question(rng):
    """Column 0 of the input is 0, so the output does not depend on w[0]; the backward adds 1
    there. The weight as a whole is in use: the message says only that the entry is off."""
    given = feeds(rng)
    given["x"].value[:, 0] = 0.0
    net = network(KeepsItsWeight(4, adds_at_first=True))
    net["fc1"].weight.set_static(True)
    net["fc1"].weight.value[...] = np.eye(4)
    net["fc1"].bias.value[...] = 0.0
    net["fc1"].bias.set_static(True)
    with pytest.raises(
        AssertionError, match=r"own.w\[0\] is off: analytic 0.99\d*, numeric 0,"
    ) as e:
        check_network_grad(net, given)
    assert "does the layer keep" not in str(e.value)


class Passes(Layer):
    """``y = x``; its backward adds ``factor`` times the gradient into ``x``'s."""

    def __init__(self, factor: float = 1.0) -> None:
        super().__init__()
        self.factor = factor

    def _forward(self, x):
        return x.value.copy()

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None and self.factor:
            dx += self.factor * dz


def test_a_layer_that_passes_nothing_down_is_named_not_only_the_weight_below(rng):
    """check_network_grad failed at fc1's weight ("analytic 0"), the layer below the one that
    added nothing into its input's gradient, and did not name that one."""
    assert check_network_grad(network(Passes()), feeds(rng)).worst < 1e-6
    with pytest.raises(AssertionError) as failed:
        check_network_grad(network(Passes(0.0)), feeds(rng))
    said = str(failed.value)
    assert said.startswith("network (loss 'loss'): gradient of param fc1."), said
    assert said.endswith(
        "nothing reached the layers below 'own' (its input 'fc1' got none; ['fc1.weight', "
        "'fc1.bias'] got 0): does its backward add into its inputs' grad (where needs_grad)?"
    ), said


def test_parameters_the_loss_does_not_reach_are_not_said_to_be_cut_off(rng):
    """fc2 and the cross-entropy are not under the loss named, a probe: their gradients are 0
    and the cross-entropy's output has none. A halved gradient fails, with no such words."""
    net = network(Passes(0.5))
    net.add("probe", FullyConnected(4, 2, dtype=F64), "own")
    with pytest.raises(AssertionError, match=r"gradient of param fc1\.") as failed:
        check_network_grad(net, feeds(rng), loss="probe")
    assert "nothing reached" not in str(failed.value)


class Chunked(Layer):
    """``y = x @ w`` summed over chunks of the inputs whose count changes at each forward,
    as a pool of threads of varying size adds its partial sums: right, and not bit for bit
    the same from one forward to the next."""

    def __init__(self, k: int, dtype) -> None:
        super().__init__()
        w = np.random.default_rng(1).standard_normal((k, 1)) / np.sqrt(k)
        self.w = self.new_param("w", w.astype(dtype))
        self.calls = 0

    def _forward(self, x):
        self.calls += 1
        parts = np.array_split(np.arange(self.w.value.shape[0]), 1 + self.calls % 7)
        return sum(x.value[:, p] @ self.w.value[p] for p in parts)

    def _backward(self, dz, callback):
        x = self.inputs[0]
        dx = grad_target(x)
        if dx is not None:
            dx += dz @ self.w.value.T
        if not self.w.static:
            self.w.grad += x.value.T @ dz
        self.w.inc_update(callback)


def test_a_layer_that_adds_in_another_order_each_forward_is_judged_not_refused():
    """Two forwards of a product over 20000 inputs, added in another order, differed by more
    than 10 times the rounding of its 2 outputs, and a right layer was refused as random,
    though its finite differences agree; a wrong one still fails, saying that it changed."""
    x = Arg(np.random.default_rng(0).standard_normal((2, 20000)).astype(np.float32))
    assert check_layer_grad(Chunked(20000, np.float32), [x]).worst < 2e-2

    class Halved(Chunked):
        def _backward(self, dz, callback):
            super()._backward(dz / 2, callback)

    with pytest.raises(ValueError, match=CHANGED + r".*; it failed so: .*is off") as e:
        check_layer_grad(Halved(20000, np.float32), [x])
    assert isinstance(e.value.__cause__, AssertionError)


class DeadDense(Layer):
    """``relu(x @ w - 100)``, dead everywhere; its backward forgets the ReLU's mask."""

    def __init__(self) -> None:
        super().__init__()
        self.w = self.new_param("w", np.random.default_rng(1).standard_normal((4, 4)))

    def _forward(self, x):
        return np.maximum(x.value @ self.w.value - 100, 0)

    def _backward(self, dz, callback):
        if not self.w.static:
            self.w.grad += self.inputs[0].value.T @ dz
        self.w.inc_update(callback)


DEAD = (
    r"numeric 0, .*; the output does not depend on {} at all here \(it stays when all of it "
    r"moves, in place too: a unit dead everywhere, as a ReLU's, or inputs of 0\?\), yet "
    r"backward gave it a gradient"
)


def test_a_weight_under_a_relu_dead_everywhere_is_not_said_to_be_kept(rng):
    """The layer reads p.value, and its ReLU is dead at every output: the hint asked whether
    it keeps an old array. Moving the weight in place, where a kept array would follow, tells
    them apart: here it says that the output does not depend on the weight at all."""
    x = Arg(rng.standard_normal((5, 4)), needs_grad=False)
    with pytest.raises(AssertionError, match=DEAD.format("DeadDense.w")) as e:
        check_layer_grad(DeadDense(), [x])
    assert "keep an old array" not in str(e.value)
    with pytest.raises(AssertionError, match=DEAD.format("own.w")) as e:
        check_network_grad(network(DeadDense()), feeds(rng))
    assert "keep an old array" not in str(e.value)


def test_a_relu_dead_everywhere_is_not_named_for_a_failure_beside_it(rng):
    """fc1's bias of -100 leaves the ReLU above it dead at every unit, so its input's gradient
    and fc1's are rightly 0; the halved gradient of the branch beside it failed the check, and
    the message named the ReLU as the layer that passed nothing down. The loss does not
    depend on fc1 there: only a parameter it depends on is said to be cut off."""
    net = Network()
    net.add("fc1", FullyConnected(4, 4, dtype=F64), "x")
    net["fc1"].bias.value[...] = -100.0
    net.add("relu", Activation("relu"), "fc1")
    net.add("fcb", FullyConnected(4, 4, dtype=F64), "x")
    net.add("own", Passes(0.5), "fcb")
    net.add("cat", Concatenate(), ["relu", "own"])
    net.add("fc2", FullyConnected(8, 3, dtype=F64), "cat")
    net.add("loss", SoftmaxCrossEntropy(), ["fc2", "label"])
    with pytest.raises(AssertionError, match=r"gradient of param fcb\.weight\[") as failed:
        check_network_grad(net, feeds(rng))
    assert "nothing reached" not in str(failed.value)
