"""``SelectiveFullyConnected`` takes its selection the way users feed it: ``Network.forward``
takes a raw integer ``(N, k)`` array as a value where ``fit`` feeds it as ids, and the layer
told a user who fed integer column indices to "feed integer column indices". Either way the
outputs and gradients are the ones computed here by hand, in numpy alone."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network
from distconv.arg import Arg
from distconv.layers import LayerError, SelectiveFullyConnected, SoftmaxCrossEntropy

pytestmark = pytest.mark.timeout(60)

N, IN, OUT, K = 6, 3, 10, 2


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x ``(N, IN)``, each row's ``K`` columns, and the label: a position in the selection."""
    rng = np.random.default_rng(7)
    cols = np.stack([rng.choice(OUT, K, replace=False) for _ in range(N)]).astype(np.int64)
    return rng.standard_normal((N, IN)), cols, rng.integers(0, K, N)


def _network(method: str) -> Network:
    net = Network()
    net.add("sfc", SelectiveFullyConnected(IN, OUT, method=method, dtype="float64"), ["x", "cols"])
    net.add("loss", SoftmaxCrossEntropy(), ["sfc", "label"])
    return net


def _reference(w: np.ndarray, b: np.ndarray, x: np.ndarray, cols: np.ndarray, label: np.ndarray):
    """Logits, mean softmax cross-entropy and its gradients for W and b, by hand."""
    logits = np.einsum("nki,ni->nk", w[cols], x) + b[cols]
    shifted = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(N), label]).mean()
    dz = p.copy()
    dz[np.arange(N), label] -= 1
    dz /= N
    dw, db = np.zeros_like(w), np.zeros_like(b)
    for n in range(N):
        for j in range(K):
            dw[cols[n, j]] += dz[n, j] * x[n]
            db[cols[n, j]] += dz[n, j]
    return logits, loss, dw, db


def _run(net: Network, feeds: dict) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    net.zero_grad()  # a backward adds into the parameters' gradients
    out = net.forward(feeds)
    net.backward(lambda p: None, "loss")
    layer = net.layers["sfc"]
    grads = (layer.weight.grad.copy(), layer.bias.grad.copy())
    return out["sfc"].value, float(out["loss"].value), *grads


@pytest.mark.parametrize("method", ["sparse", "dense"])
def test_a_raw_integer_selection_computes_what_arg_ids_do_and_the_reference(method):
    x, cols, label = _inputs()
    net = _network(method)
    layer = net.layers["sfc"]
    want = _reference(layer.weight.value, layer.bias.value, x, cols, label)
    raw = _run(net, {"x": x, "cols": cols, "label": label})
    as_ids = _run(net, {"x": x, "cols": Arg(ids=cols, needs_grad=False), "label": label})
    for got in (raw, as_ids):
        for value, expected in zip(got, want):
            np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-14)
    for a, b in zip(raw, as_ids):
        np.testing.assert_array_equal(a, b)  # the same computation, bit for bit
    assert layer.rows_read([Arg(x), Arg(cols)]) == layer.rows_read([Arg(x), Arg(ids=cols)])


def test_a_float_selection_is_told_to_be_integer_columns():
    x, cols, label = _inputs()
    said = (
        r"^SelectiveFullyConnected 'sfc': the selection \(last input\) must be integer column "
        r"indices, got float64 values: feed an integer array, or Arg\(ids=cols\)$"
    )
    with pytest.raises(LayerError, match=said):
        _network("auto").forward({"x": x, "cols": cols.astype(float), "label": label})
