"""SoftmaxCrossEntropy from one exponential of the logits: its loss where a class's probability
underflows, its probabilities, and a gradient added into what the input already holds."""

import ml_dtypes
import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.layers import SoftmaxCrossEntropy


def _run(z: np.ndarray, ids: np.ndarray, grad: np.ndarray | None = None):
    """The layer, its input and its loss after a forward and a backward of gradient 1."""
    layer, x = SoftmaxCrossEntropy(), Arg(z, needs_grad=True)
    if grad is not None:
        x.grad = grad.copy()
    loss = layer(x, Arg(ids=ids)).value
    layer.output.grad = np.ones((), loss.dtype)
    layer.backward(lambda p: None)
    return layer, x, loss


def test_a_label_whose_probability_underflows_has_a_finite_loss_of_the_logit_gap():
    """exp(-10000) is 0: the loss is the picked logit's distance below the log-normaliser."""
    layer, x, loss = _run(np.array([[0.0, -1e4], [3.0, 3.0]]), np.array([1, 0]))
    assert float(loss) == pytest.approx((1e4 + np.log(2)) / 2, rel=1e-15)
    np.testing.assert_allclose(x.grad, [[0.5, -0.5], [-0.25, 0.25]], atol=1e-15)


def test_probabilities_are_the_softmax_and_backward_leaves_them(rng):
    z = rng.standard_normal((4, 50)) * 40
    layer, _, _ = _run(z, rng.integers(0, 50, 4))
    ref = np.exp(z.astype(np.longdouble) - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(layer.prob, (ref / ref.sum(axis=1, keepdims=True)), rtol=1e-12)


def test_the_gradient_is_added_to_what_the_input_holds(rng):
    z, ids = rng.standard_normal((3, 6)), np.array([5, 0, 2])
    _, fresh, _ = _run(z, ids)
    held = rng.standard_normal((3, 6))
    _, added, _ = _run(z, ids, grad=held)
    np.testing.assert_allclose(added.grad, held + fresh.grad, rtol=1e-15)


@pytest.mark.parametrize("spread", [1.0, 30.0])
def test_gradients_match_finite_differences_at_any_logit_spread(rng, spread):
    logits = Arg(rng.standard_normal((5, 7)) * spread)
    ids = np.argsort(logits.value, axis=1)[:, [0, -1, 3, 0, -1]].diagonal()  # least and most
    check_layer_grad(SoftmaxCrossEntropy(), [logits, Arg(ids=ids)])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("batch", [4, 3, 100])
def test_a_16_bit_gradient_is_float32s_rounded_once(rng, dtype, batch):
    """A nearly certain label's gradient, prob - 1, is small: computed in float32 and rounded
    once into the 16-bit gradient, as from a float32 input. At a batch that is no power of
    two the 1 / batch scale is itself a rounding, so it is taken in float32 too."""
    z = rng.standard_normal((batch, 10)).astype(dtype)
    ids = z.argmax(axis=1)
    z[np.arange(batch), ids] += 8  # probability ~0.999 on the label
    _, half, _ = _run(z, ids)
    _, single, _ = _run(z.astype(np.float32), ids)
    assert half.grad.dtype == dtype
    np.testing.assert_array_equal(half.grad, single.grad.astype(dtype))
