"""What SoftmaxCrossEntropy says of logits it cannot take a loss of: a non-finite logit
leaked numpy's "invalid value encountered in subtract" (raised under ``-W error``), and logits
with no classes were blamed on the labels ("labels must lie in [0, 0)")."""

import warnings

import numpy as np
import pytest

from distconv import Arg
from distconv.layers import SoftmaxCrossEntropy
from distconv.layers.errors import LayerError

INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize(
    "bad_row",
    [
        pytest.param([INF, 0.0, 1.0], id="+inf"),
        pytest.param([-INF, -INF, -INF], id="-inf throughout"),
        pytest.param([NAN, 0.0, 1.0], id="NaN"),
    ],
)
def test_a_non_finite_logit_makes_a_nan_loss_quietly(bad_row):
    """Under warnings as errors, forward and backward run: the loss is NaN, as PyTorch's, the
    bad row's gradient NaN and the finite row's as it would be alone (over a batch of 2)."""
    good_row = [0.5, -1.0, 2.0]
    logits = Arg(np.array([good_row, bad_row]), needs_grad=True)
    loss = SoftmaxCrossEntropy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = loss(logits, Arg(ids=np.array([2, 1])))
        out.grad[...] = 1.0
        loss.backward(lambda p: None)
    assert np.isnan(out.value)
    assert np.isnan(logits.grad[1]).all()
    alone = Arg(np.array([good_row]), needs_grad=True)
    single = SoftmaxCrossEntropy()
    single(alone, Arg(ids=np.array([2]))).grad[...] = 1.0
    single.backward(lambda p: None)
    np.testing.assert_allclose(logits.grad[0], alone.grad[0] / 2, rtol=1e-15)


def test_logits_with_no_classes_are_refused_naming_their_shape():
    with pytest.raises(LayerError) as refused:
        SoftmaxCrossEntropy()(Arg(np.zeros((2, 0))), Arg(ids=np.array([0, 0])))
    assert str(refused.value) == (
        "SoftmaxCrossEntropy: the logits have no classes: shape (2, 0), need (N, >= 1)"
    )


@pytest.mark.parametrize("bad", [INF, NAN], ids=["+inf", "NaN"])
def test_the_softmax_activation_makes_its_nan_row_as_quietly_as_the_loss(bad):
    """The softmax activation's row with a +inf or NaN logit is NaN, as PyTorch's, without
    numpy's "invalid value" warning; the other row's probabilities are untouched."""
    from distconv.kernels.activation import Softmax

    z = np.array([[0.5, -1.0, 2.0], [bad, 0.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = Softmax().forward(z)
    assert np.isnan(y[1]).all()
    e = np.exp(z[0] - z[0].max())
    np.testing.assert_allclose(y[0], e / e.sum(), rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_finite_logits_at_both_ends_of_the_type_make_their_loss_quietly(dtype):
    """A diverged run's logits at both ends of the type shift past its range: numpy's
    "overflow encountered in subtract" leaked from the loss and the softmax (raised under
    ``-W error``). The far logit's probability is 0: picked, an infinite loss, as PyTorch's."""
    from distconv.kernels.activation import Softmax

    big = float(np.finfo(dtype).max)
    z = np.array([[big, -big, 0.0], [big, -big, 0.0]], dtype)
    logits, loss = Arg(z.copy(), needs_grad=True), SoftmaxCrossEntropy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = loss(logits, Arg(ids=np.array([0, 1])))
        out.grad[...] = 1.0
        loss.backward(lambda p: None)
        probabilities = Softmax().forward(z)
    assert out.value == INF
    np.testing.assert_array_equal(logits.grad, [[0, 0, 0], [0.5, -0.5, 0]])
    np.testing.assert_array_equal(probabilities, [[1, 0, 0], [1, 0, 0]])
