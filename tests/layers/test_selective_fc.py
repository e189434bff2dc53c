import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.layers import FullyConnected, LayerError, MSELoss
from distconv.layers.selective_fc import SPARSE_MAX_DENSITY, SelectiveFullyConnected
from distconv.network import Network

F64 = np.float64
METHODS = ["sparse", "dense", "auto"]


def _cols(rng, n, k, out, *, replace=False):
    """``(n, k)`` column choices; ``replace`` allows a sample to pick a column twice."""
    return np.stack([rng.choice(out, k, replace=replace) for _ in range(n)])


def _csr(cols):
    n, k = cols.shape
    return Arg(ids=cols.reshape(-1), seq_starts=np.arange(0, n * k + 1, k))


def _layer(in_f, out_f, rng, **kw):
    layer = SelectiveFullyConnected(in_f, out_f, dtype=F64, **kw)
    if layer.bias is not None:
        layer.bias.value[...] = rng.standard_normal(out_f)
    return layer


# -- gradients ------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [None, "softmax", "tanh"])
def test_selective_gradients(rng, method, bias, act):
    layer = _layer(7, 20, rng, bias=bias, act=act, method=method)
    x = Arg(rng.standard_normal((5, 7)))
    report = check_layer_grad(layer, [x, Arg(ids=_cols(rng, 5, 4, 20))])
    assert {"input 0", f"param {layer.name}.weight"} <= set(report.diffs)
    assert layer.output.shape == (5, 4)


@pytest.mark.parametrize("method", ["sparse", "dense"])
def test_selective_gradients_csr_duplicates_and_sequences(rng, method):
    # a sample may pick a column twice; the input is an image batch; offsets pass through
    layer = _layer(2 * 3 * 2, 9, rng, act="sigmoid", method=method)
    x = Arg(rng.standard_normal((4, 2, 3, 2)), seq_starts=np.array([0, 1, 4]))
    cols = _cols(rng, 4, 6, 9, replace=True)
    cols[0, :2] = 5  # certainly a duplicate
    check_layer_grad(layer, [x, _csr(cols)])
    assert layer.output.seq_starts.tolist() == [0, 1, 4]


@pytest.mark.parametrize("method", ["sparse", "dense"])
@pytest.mark.parametrize("csr", [False, True])
def test_an_empty_selection_under_a_softmax_selects_nothing(rng, method, csr):
    """A batch that selects no column at all (a sampled softmax's negatives, none drawn): the
    softmax over zero columns failed with numpy's "zero-size array to reduction operation
    maximum which has no identity". Its output is empty and nothing gets a gradient."""
    layer = _layer(4, 6, rng, act="softmax", method=method)
    x = Arg(rng.standard_normal((3, 4)))
    cols = np.zeros((3, 0), np.int64)
    empty_csr = Arg(ids=cols.reshape(-1), seq_starts=np.zeros(4, np.int64))
    out = layer(x, empty_csr if csr else Arg(ids=cols))
    assert out.shape == (3, 0)
    out.grad = np.zeros((3, 0))
    layer.backward(lambda p: None)
    assert not x.grad.any() and not layer.weight.grad.any() and not layer.bias.grad.any()


@pytest.mark.filterwarnings("error::RuntimeWarning")  # -inf - -inf warned, then gave NaN
@pytest.mark.parametrize("method", ["sparse", "dense"])
def test_a_sample_that_selects_nothing_gets_no_probability_under_a_softmax(rng, method):
    """In inference, a sample with no column among others that have some is all padding:
    -inf (the default pad_value, which "makes a softmax give the padding zero probability").
    The softmax shifted that row by its -inf maximum and gave NaN for all of it."""
    layer = _layer(4, 6, rng, act="softmax", inference=True, method=method)
    x = Arg(rng.standard_normal((3, 4)))
    sel = Arg(ids=np.array([1, 2, 3, 4]), seq_starts=np.array([0, 2, 2, 4]))
    y = layer(x, sel).value
    assert y.shape == (3, 2)
    np.testing.assert_array_equal(y[1], [0, 0])  # nothing selected: nothing has probability
    z = x.value[0] @ layer.weight.value[[1, 2]].T + layer.bias.value[[1, 2]]
    np.testing.assert_allclose(y[0], np.exp(z - z.max()) / np.exp(z - z.max()).sum(), rtol=1e-12)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_finite_padding_that_float16_holds_as_minus_inf_gives_no_probability(rng):
    """-1e5 padding is -inf in float16: a sample that selects nothing was a NaN row there,
    where float32 gives the same padding as a finite value its share. Nor does each forward
    warn 'overflow encountered in cast' of the padding it was told to write."""
    layer = SelectiveFullyConnected(
        4, 6, dtype=np.float16, act="softmax", inference=True, pad_value=-1e5
    )
    x = Arg(rng.standard_normal((3, 4)).astype(np.float16))
    sel = Arg(ids=np.array([1, 2, 3, 4]), seq_starts=np.array([0, 2, 2, 4]))
    y = layer(x, sel).value
    np.testing.assert_array_equal(y[1], [0, 0])
    assert np.isfinite(y).all()


def test_selective_float32_gradients(rng):
    layer = SelectiveFullyConnected(6, 30, act="tanh")
    x = Arg(rng.standard_normal((3, 6)).astype(np.float32))
    assert check_layer_grad(layer, [x, Arg(ids=_cols(rng, 3, 5, 30))]).worst <= 0.02


@pytest.mark.parametrize("bias", [True, False])
def test_full_output_gradients(rng, bias):
    layer = _layer(5, 6, rng, bias=bias, act="relu")
    check_layer_grad(layer, [Arg(rng.standard_normal((3, 5)))])
    assert layer.full_output and layer.output.shape == (3, 6)


# -- against a dense reference --------------------------------------------------------------------
def _run(layer, x, dy, sel=None):
    xa = Arg(x)
    y = layer(xa, *([sel] if sel is not None else [])).value.copy()
    layer.output.grad = dy
    layer.backward(lambda p: None)
    return y, xa.grad, layer.weight.grad, layer.bias.grad


def _torch_reference(torch, x, w, b, cols=None, dy=None, act=None):
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    y = torch.nn.functional.linear(tx, tw, tb)
    if cols is not None:
        y = y.gather(1, torch.tensor(cols))
    if act == "softmax":
        y = torch.softmax(y, dim=1)
    y.backward(torch.tensor(dy))
    return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()


def test_full_output_parity_with_torch_linear(torch, rng):
    layer = _layer(8, 11, rng)
    x, dy = rng.standard_normal((4, 8)), rng.standard_normal((4, 11))
    want = _torch_reference(torch, x, layer.weight.value, layer.bias.value, dy=dy)
    for got, ref, what in zip(_run(layer, x, dy), want, ("y", "dx", "dw", "db")):
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("k,act", [(3, None), (40, "softmax"), (200, None)])
@pytest.mark.parametrize("csr", [False, True])
def test_selective_matches_full_then_gather(torch, rng, method, k, act, csr):
    # torch's gather backward sums duplicates, so picking with replacement checks that too
    layer = _layer(16, 200, rng, act=act, method=method)
    x, dy = rng.standard_normal((6, 16)), rng.standard_normal((6, k))
    cols = _cols(rng, 6, k, 200, replace=k < 200)
    sel = _csr(cols) if csr else Arg(ids=cols)
    want = _torch_reference(torch, x, layer.weight.value, layer.bias.value, cols, dy, act)
    got = _run(layer, x, dy, sel)
    for g, ref, what in zip(got, want, ("y", "dx", "dw", "db")):
        np.testing.assert_allclose(g, ref, rtol=1e-10, atol=1e-12, err_msg=what)
    np.testing.assert_array_equal(layer.output.ids, cols)


def test_methods_agree_and_auto_picks_by_density(rng):
    x, w = rng.standard_normal((3, 10)), rng.standard_normal((1000, 10))
    for k, sparse in ((2, True), (int(SPARSE_MAX_DENSITY * 1000) + 1, False)):
        cols, dy = _cols(rng, 3, k, 1000), rng.standard_normal((3, k))
        results = {}
        for m in METHODS:
            layer = _layer(10, 1000, np.random.default_rng(7), method=m)
            layer.weight.value[...] = w
            results[m] = _run(layer, x, dy, Arg(ids=cols))
            if m == "auto":
                assert layer._sparse(k) is sparse
        for m in ("dense", "auto"):
            for a, b in zip(results["sparse"], results[m]):
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("method", ["sparse", "dense"])
def test_gradients_touch_only_selected_rows(rng, method):
    # Rows never selected must not even receive a +0.0: -0.0 + 0.0 would flip the sign bit.
    layer = _layer(4, 50, rng, method=method)
    layer.weight.grad[...] = -0.0
    layer.bias.grad[...] = -0.0
    cols = np.array([[3, 7], [7, 41]])
    _run(layer, rng.standard_normal((2, 4)), rng.standard_normal((2, 2)), Arg(ids=cols))
    untouched = np.setdiff1d(np.arange(50), cols)
    assert np.signbit(layer.weight.grad[untouched]).all()
    assert np.signbit(layer.bias.grad[untouched]).all()
    assert (layer.weight.grad[[3, 7, 41]] != 0).all()


def test_inside_a_network(rng):
    net = Network()
    net.add("sfc", _layer(5, 30, rng, act="tanh"), inputs=["x", "sel"])
    net.add("loss", MSELoss(), inputs=["sfc", "target"])
    cols = _cols(rng, 4, 3, 30)
    feeds = {
        "x": Arg(rng.standard_normal((4, 5)), needs_grad=False),
        "sel": Arg(ids=cols),
        "target": Arg(np.zeros((4, 3)), needs_grad=False),
    }
    out = net.forward(feeds)
    fired = []
    net.backward(fired.append)
    w = net["sfc"].weight
    assert out["sfc"].shape == (4, 3)
    assert [p.name for p in fired] == ["sfc.bias", "sfc.weight"]
    touched = np.flatnonzero(np.abs(w.grad).sum(axis=1))
    np.testing.assert_array_equal(touched, np.unique(cols))


# -- inference with uneven selections -------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint32, np.uint8])
def test_inference_pads_uneven_selections(rng, dtype):
    """Any integer ids, unsigned ones too: their -1 pads once overflowed."""
    layer = _layer(4, 12, rng, act="softmax", inference=True)
    x = rng.standard_normal((3, 4))
    sel = Arg(ids=np.array([1, 5, 9, 2, 0, 11], dtype), seq_starts=np.array([0, 3, 4, 6]))
    y = layer(Arg(x), sel).value
    full = x @ layer.weight.value.T + layer.bias.value
    cols = [[1, 5, 9], [2], [0, 11]]
    assert y.shape == (3, 3)
    for b, c in enumerate(cols):
        e = np.exp(full[b, c] - full[b, c].max())
        np.testing.assert_allclose(y[b, : len(c)], e / e.sum(), rtol=1e-12)
        assert (y[b, len(c) :] == 0).all()
    assert layer.output.ids.tolist() == [[1, 5, 9], [2, -1, -1], [0, 11, -1]]
    layer.output.grad = np.ones_like(y)
    with pytest.raises(LayerError, match="uneven .*inference mode is forward-only"):
        layer.backward(lambda p: None)


def test_inference_pad_value_before_activation(rng):
    # a sigmoid, so "before" shows: a padding of 0 comes out sigmoid(0) = 0.5, where one
    # written after the activation stays 0 (with no activation the two were the same)
    layer = _layer(2, 5, rng, inference=True, pad_value=0.0, act="sigmoid")
    sel = Arg(ids=np.array([4, 1, 3]), seq_starts=np.array([0, 1, 3]))
    x = rng.standard_normal((2, 2))
    y = layer(Arg(x), sel).value
    z = x @ layer.weight.value.T + layer.bias.value
    want = 1 / (1 + np.exp(-np.array([[z[0, 4], 0.0], [z[1, 1], z[1, 3]]])))
    np.testing.assert_allclose(y, want, rtol=1e-12)


# -- errors ---------------------------------------------------------------------------------------
def test_uneven_selection_while_training_names_the_layer():
    layer = SelectiveFullyConnected(3, 10, name="out")
    sel = Arg(ids=np.array([1, 2, 3]), seq_starts=np.array([0, 1, 3]))
    with pytest.raises(
        LayerError,
        match=r"SelectiveFullyConnected 'out': every sample must select the same number of "
        r"columns to train, got counts from 1 to 2; .*inference=True",
    ):
        layer(Arg(np.zeros((2, 3), np.float32)), sel)


@pytest.mark.parametrize(
    "sel,match",
    [
        (Arg(ids=np.array([[0, 10]] * 2)), r"lie in \[0, 10\), got range \[0, 10\]"),
        (Arg(ids=np.array([[0, -1]] * 2)), r"got range \[-1, 0\]"),
        (Arg(ids=np.array([[0.0, 1.0]] * 2)), "must be integers, got dtype float64"),
        (Arg(ids=np.array([0, 1, 2, 3])), r"a \(2, k\) table of columns, got ids of shape \(4,\)"),
        (Arg(ids=np.array([[0, 1]] * 3)), r"\(2, k\) table .* shape \(3, 2\)"),
        (Arg(ids=np.array([0, 1, 2]), seq_starts=np.array([0, 3])), "1 rows .* batch of 2"),
        (Arg(ids=np.array([0, 1, 2]), seq_starts=np.array([0, 2, 2, 4])), "rise from 0 to .* 3"),
        (Arg(ids=np.array([0, 1, 2]), seq_starts=np.array([0, 2, 1, 3])), "rise from 0"),
        (Arg(np.zeros((2, 2))), "must be integer column indices, got float64 values"),
    ],
)
def test_bad_selections(sel, match):
    layer = SelectiveFullyConnected(3, 10, name="sfc")
    with pytest.raises(LayerError, match="SelectiveFullyConnected 'sfc': .*" + match):
        layer(Arg(np.zeros((2, 3), np.float32)), sel)


def test_bad_construction_and_inputs():
    with pytest.raises(LayerError, match="method must be one of"):
        SelectiveFullyConnected(3, 4, method="fast")
    with pytest.raises(
        LayerError, match=r"expected 3 features per sample, got input shape \(2, 4\)"
    ):
        SelectiveFullyConnected(3, 4)(Arg(np.zeros((2, 4))), Arg(ids=np.zeros((2, 1), int)))
    with pytest.raises(LayerError, match="expected 1 to 2 input"):
        SelectiveFullyConnected(3, 4)(Arg(np.zeros((2, 3))), Arg(ids=[0]), Arg(ids=[0]))


# -- several inputs, each with its own weight (Paddle's layer sums them) ---------------------------
def _two_input_layer(rng, **kw):
    layer = SelectiveFullyConnected((4, 2 * 3), 12, dtype=F64, name="sfc", **kw)
    layer.bias.value[...] = rng.standard_normal(12)
    return layer


@pytest.mark.parametrize("method", ["sparse", "dense"])
@pytest.mark.parametrize("selected", [False, True])
def test_several_inputs_gradients(rng, method, selected):
    layer = _two_input_layer(rng, act="tanh", method=method)
    a, b = Arg(rng.standard_normal((5, 4))), Arg(rng.standard_normal((5, 2, 3)))
    sel = [Arg(ids=_cols(rng, 5, 3, 12))] if selected else []
    report = check_layer_grad(layer, [a, b, *sel])
    assert {"input 0", "input 1", "param sfc.weight0", "param sfc.weight1"} <= set(report.diffs)


@pytest.mark.parametrize("method", ["sparse", "dense"])
def test_several_inputs_sum_their_products(rng, method):
    layer = _two_input_layer(rng, method=method)
    w0, w1 = (w.value for w in layer.weights)
    a, b = rng.standard_normal((5, 4)), rng.standard_normal((5, 6))
    cols = _cols(rng, 5, 3, 12)
    full = a @ w0.T + b @ w1.T + layer.bias.value
    y = layer(Arg(a), Arg(b.reshape(5, 2, 3)), Arg(ids=cols)).value
    np.testing.assert_allclose(y, np.take_along_axis(full, cols, axis=1), rtol=1e-12)
    np.testing.assert_allclose(layer(Arg(a), Arg(b)).value, full, rtol=1e-12)
    assert [w.shape for w in layer.weights] == [(12, 4), (12, 6)] and layer.weight is layer.weights[
        0
    ]


def test_several_inputs_fire_each_weight_once(rng):
    layer = _two_input_layer(rng)
    fired = []
    y = layer(
        Arg(rng.standard_normal((2, 4))),
        Arg(rng.standard_normal((2, 6))),
        _csr(_cols(rng, 2, 2, 12)),
    )
    y.grad = np.ones(y.shape)
    layer.backward(lambda p: fired.append(p.name))
    assert fired == ["sfc.bias", "sfc.weight0", "sfc.weight1"]


def test_several_inputs_errors():
    with pytest.raises(LayerError, match=r"input 1: expected 6 features per sample, got input"):
        SelectiveFullyConnected((4, 6), 5)(Arg(np.zeros((2, 4))), Arg(np.zeros((2, 5))))
    with pytest.raises(LayerError, match=r"weight= needs one entry per input \(2\), got 1"):
        SelectiveFullyConnected((4, 6), 5, weight=[None])
    with pytest.raises(LayerError, match="expected 2 to 3 input"):
        SelectiveFullyConnected((4, 6), 5)(Arg(np.zeros((2, 4))))


def test_an_unknown_option_is_refused_before_any_weight_is_drawn():
    from distconv.init import set_seed

    set_seed(1)
    expected = FullyConnected(4, 3).weight.value.copy()
    set_seed(1)
    with pytest.raises(TypeError, match="SelectiveFullyConnected: .*unexpected keyword.*'methd'"):
        SelectiveFullyConnected(4, 3, methd="dense")
    np.testing.assert_array_equal(FullyConnected(4, 3).weight.value, expected)


def test_a_bfloat16_layer_with_a_sparse_selection_runs_as_float64_does(rng):
    """numpy's einsum refuses ml_dtypes' types: a bfloat16 layer whose selection took the
    sparse path (auto, 2 of 1000 columns) failed its first forward with 'invalid data type for
    einsum', where the dense path's matmul took it."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    x64 = rng.standard_normal((4, 6)).astype(bf16).astype(F64)
    dy = rng.standard_normal((4, 2)).astype(bf16)
    cols = np.array([[1, 2], [3, 4], [5, 6], [7, 999]])
    got = {}
    for dtype in (bf16, F64):
        layer = SelectiveFullyConnected(6, 1000, dtype=dtype)
        layer.weight.value[...] = np.linspace(-1, 1, 6000).reshape(1000, 6).astype(bf16)
        x = Arg(x64.astype(dtype), needs_grad=True)
        y = layer(x, Arg(ids=cols)).value
        layer.output.grad = dy.astype(y.dtype)
        layer.backward(lambda p: None)
        got[dtype] = [a.astype(F64) for a in (y, x.grad, layer.weight.grad)]
    for a, want in zip(got[bf16], got[F64]):
        np.testing.assert_allclose(a, want, rtol=2**-7, atol=2**-7 * np.abs(want).max())


@pytest.mark.timeout(60)
def test_a_float16_layers_sparse_input_gradient_sums_its_columns_in_float32():
    """einsum added a float16 sparse path's input gradient over the sample's k columns in
    float16: with 4096 columns of dz 0.1 and weights 1 it stopped at 256, not 409.6 (random
    data over 1024 columns: off by 0.6%, where the sum rounded once is off by 0.02%)."""
    got = {}
    for dtype in (np.float16, F64):
        layer = SelectiveFullyConnected(3, 5000, dtype=dtype, method="sparse")
        layer.weight.value[...] = 1.0
        x = Arg(np.ones((2, 3), dtype), needs_grad=True)
        cols = np.tile(np.arange(4096), (2, 1))
        y = layer(x, Arg(ids=cols)).value
        layer.output.grad = np.full(y.shape, 0.1, np.float16).astype(y.dtype)
        layer.backward(lambda p: None)
        assert x.grad.dtype == dtype
        got[dtype] = x.grad.astype(F64)
    np.testing.assert_allclose(got[np.float16], got[F64], rtol=2**-10)
