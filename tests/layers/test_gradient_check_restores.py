"""check_layer_grad puts back what it changes on the parameters it checks, however it ends."""

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.layers import FullyConnected

F64 = np.float64


class HalfWeightFC(FullyConnected):
    """Adds half the weight's gradient: a check of it fails."""

    def _backward(self, dz, callback):
        self.weight.grad -= 0.5 * (dz.T @ self.inputs[0].value)
        super()._backward(dz, callback)


def tied_pair(rng, first=FullyConnected):
    """Two layers called by hand that share one weight, counted as the README says."""
    l0 = first(3, 3, bias=False, dtype=F64, name="l0")
    l1 = FullyConnected(3, 3, bias=False, weight=l0.weight, dtype=F64, name="l1")
    l0.weight.value[...] = rng.standard_normal((3, 3))
    l0.weight.shared_count = 2
    return l0, l1


def count_fired(weight):
    """A callback counting its firings, and the list it counts into."""
    fired = []
    return fired, lambda p: fired.append(p is weight)


@pytest.mark.parametrize("check_static", [True, False])
def test_a_check_puts_back_the_count_the_gradient_and_the_pending_user(rng, check_static):
    """The check set shared_count to the layer's own count (1 here, 2 by hand), zeroed the
    gradient being accumulated, forgot the user already counted in this pass and (with the
    static pass) left a new gradient array in place of the parameter's own; the next by-hand
    pass fired the weight after its first user, with half its gradient."""
    l0, l1 = tied_pair(rng)
    w = l0.weight
    grad, value = w.grad, w.value.copy()
    grad[...] = 3.0  # a gradient accumulated over passes (keep_gradient)
    fired, callback = count_fired(w)
    w.inc_update(callback)  # one of its two users is in
    assert fired == []
    check_layer_grad(l1, [Arg(rng.standard_normal((4, 3)))], check_static=check_static)
    assert w.shared_count == 2 and w.static is False
    assert w.grad is grad and np.array_equal(grad, np.full((3, 3), 3.0))
    assert np.array_equal(w.value, value)
    w.inc_update(callback)  # the second user: the pass is complete
    assert fired == [True]

    grad[...] = 0  # the README's by-hand pass: the weight fires once, after both users
    x = Arg(rng.standard_normal((4, 3)), needs_grad=False)
    y = l1(l0(x))
    y.grad = np.ones_like(y.value)
    complete = []
    for layer in (l1, l0):
        layer.backward(lambda p: complete.append(p.grad.copy()))
    assert len(complete) == 1
    h = x.value @ w.value.T  # l0's output; l1's weight gradient is ones.T @ h, l0's g1.T @ x
    want = np.ones((3, 4)) @ h + (np.ones((4, 3)) @ w.value).T @ x.value
    assert np.allclose(complete[0], want, rtol=1e-12)


def test_a_check_that_fails_puts_them_back_too(rng):
    l0, _ = tied_pair(rng, first=HalfWeightFC)
    w = l0.weight
    grad, value = w.grad, w.value.copy()
    grad[...] = 3.0
    fired, callback = count_fired(w)
    w.inc_update(callback)
    with pytest.raises(AssertionError, match=r"gradient of param l0\.weight.* is off"):
        check_layer_grad(l0, [Arg(rng.standard_normal((4, 3)))])
    assert w.shared_count == 2 and w.static is False
    assert w.grad is grad and np.array_equal(grad, np.full((3, 3), 3.0))
    assert np.array_equal(w.value, value)
    w.inc_update(callback)
    assert fired == [True]
