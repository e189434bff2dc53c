"""A 16-bit loss's seed: ``Network.backward`` filled it with ``loss_scale`` in the loss's own
dtype, so a float16 batch of 3001 rows was seeded 3000 (bfloat16 rounds 257 to 256), and every
gradient was 1/3001 too small. It is float32, which each loss layer's backward takes as it
is; the gradients are the float64 ones (PyTorch's) rounded once."""

import ml_dtypes
import numpy as np
import pytest

from distconv import Arg
from distconv.layers import MSELoss, SoftmaxCrossEntropy
from distconv.network import Network


def _seeded_gradient(loss, pred: np.ndarray, target: Arg) -> tuple[np.ndarray, np.ndarray]:
    """The loss's seed and its input's gradient from a backward of ``loss_scale`` = rows, as
    the Trainer seeds it."""
    net = Network()
    net.add("loss", loss, inputs=["pred", "target"])
    x = Arg(pred, needs_grad=True)
    net.forward({"pred": x, "target": target})
    net.backward(lambda p: None, loss="loss", loss_scale=len(pred))
    return net.outputs["loss"].grad, x.grad


def test_a_float16_cross_entropy_of_3001_rows_has_pytorchs_gradient(rng):
    torch = pytest.importorskip("torch")  # only here: the squared errors' need none
    n = 3001  # no float16: its neighbours are 3000 and 3002
    z = rng.standard_normal((n, 10)).astype(np.float16)
    ids = rng.integers(0, 10, n)
    seed, got = _seeded_gradient(SoftmaxCrossEntropy(), z, Arg(ids=ids))
    assert seed == n and got.dtype == np.float16
    logits = torch.tensor(z.astype(np.float64), requires_grad=True)
    torch.nn.functional.cross_entropy(logits, torch.tensor(ids), reduction="sum").backward()
    want = logits.grad.numpy().astype(np.float16)  # float64's, rounded once
    # float32's probabilities differ from float64's in a last place, now and then
    assert np.mean(got != want) < 0.01
    np.testing.assert_allclose(got, want, rtol=2**-10, atol=2**-24)


@pytest.mark.parametrize(
    ("dtype", "n"), [(np.float16, 3001), (ml_dtypes.bfloat16, 257)], ids=["float16", "bfloat16"]
)
def test_a_16_bit_squared_error_is_seeded_with_its_row_count(rng, dtype, n):
    """Against a target of zeros, ``d(n * mean(pred^2)) / d(pred)`` of one column is ``2 * pred``
    exactly, in any type."""
    pred = rng.standard_normal((n, 1)).astype(dtype)
    seed, got = _seeded_gradient(MSELoss(), pred, Arg(np.zeros_like(pred)))
    assert seed == n and got.dtype == dtype
    np.testing.assert_array_equal(got, 2 * pred)


@pytest.mark.parametrize(
    ("dtype", "n"), [(np.float16, 3001), (ml_dtypes.bfloat16, 257)], ids=["float16", "bfloat16"]
)
def test_a_16_bit_squared_errors_gradient_is_rounded_once(rng, dtype, n):
    """Of three columns, ``d(n * mean((pred - target)^2)) / d(pred)`` is ``(pred - target) *
    2/3``: the difference taken in float32 as in forward, not rounded to 16 bits first (a fifth
    of the gradients were an ulp off)."""
    pred, target = (rng.standard_normal((n, 3)).astype(dtype) for _ in range(2))
    _, got = _seeded_gradient(MSELoss(), pred, Arg(target))
    want = (pred.astype(np.float64) - target.astype(np.float64)) * 2 / 3
    np.testing.assert_array_equal(got, want.astype(dtype))
