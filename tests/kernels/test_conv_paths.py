"""The convolution layouts (per-sample and batched), the cost model, the autotuner, threads."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.kernels import conv as conv_module
from distconv.kernels import conv_layout
from distconv.kernels.conv import conv_any_backward, conv_backward, conv_backward_data, conv_forward
from distconv.kernels.conv_columns import column_layout
from distconv.kernels.conv_layout import use_batched
from distconv.kernels.parallel import num_threads
from distconv.kernels.shape import ConvGeometry

# (nd, N, C, spatial, O, k, stride, pad, dilation, groups)
CASES = [
    (2, 5, 4, (9, 9), 6, 3, 1, 1, 1, 1),
    (2, 4, 6, (8, 7), 4, 3, 2, 1, 1, 2),
    (2, 3, 2, (10, 10), 3, (3, 2), (1, 2), (1, 0), (2, 1), 1),
    (2, 6, 8, (5, 5), 8, 3, 1, 1, 1, 4),  # the flipped-kernel data gradient
    (3, 2, 2, (5, 6, 4), 3, 3, 2, 1, 1, 1),
    (2, 5, 1, (9, 8), 12, 3, 1, 1, 1, 1),  # exact (not wide) columns: 9 rows, 12 outputs
    (2, 4, 4, (6, 7), 24, 1, 1, 0, 1, 2),  # the same, grouped 1x1
    (1, 4, 6, (11,), 4, 3, 2, 1, 2, 2),  # a strided, dilated, grouped sequence
]


def _direct(x, w, geom):
    """The convolution as the definition's sum over kernel offsets, in float64 (no im2col)."""
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    G = geom.groups
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in geom.pad])
    out = geom.out_size(x.shape[2:])
    y = np.zeros((n, o, *out))
    for offset in np.ndindex(*geom.ksize):
        sl = tuple(
            slice(k * d, k * d + s * (m - 1) + 1, s)
            for k, d, s, m in zip(offset, geom.dilation, geom.stride, out)
        )
        patch = xp[(slice(None), slice(None)) + sl].reshape(n, G, cg, -1)
        wk = w[(slice(None), slice(None)) + offset].reshape(G, o // G, cg)
        y += np.einsum("goc,ngcl->ngol", wk, patch).reshape(n, o, *out)
    return y


def _case(rng, nd, n, c, sp, o, k, s, p, d, g):
    geom = ConvGeometry.make(nd, k, s, p, d, g)
    x = rng.standard_normal((n, c, *sp))
    w = rng.standard_normal((o, c // g, *geom.ksize))
    return geom, x, w


@pytest.mark.parametrize("case", CASES)
def test_both_layouts_match_the_definition(rng, layout, case):
    geom, x, w = _case(rng, *case)
    y, _ = conv_forward(x, w, geom)
    np.testing.assert_allclose(y, _direct(x, w, geom), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", CASES)
def test_both_layouts_give_the_same_gradients(rng, force_layout, case):
    geom, x, w = _case(rng, *case)
    dy = rng.standard_normal((x.shape[0], w.shape[0], *geom.out_size(x.shape[2:])))
    results = []
    for batched in (False, True):
        force_layout(batched)
        results.append(conv_backward(dy, x, w, geom))
    (dx0, dw0), (dx1, dw1) = results
    np.testing.assert_allclose(dx0, dx1, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dw0, dw1, rtol=1e-10, atol=1e-10)
    # each gradient is an adjoint of the forward, checked against the definition (the layouts
    # share the flipped-kernel route, so agreeing with each other proves nothing about it):
    # <dy, conv(x, v)> == <dw, v> and <dy, conv(u, w)> == <dx, u>
    v, u = rng.standard_normal(w.shape), rng.standard_normal(x.shape)
    np.testing.assert_allclose((dy * _direct(x, v, geom)).sum(), (dw1 * v).sum(), rtol=1e-9)
    np.testing.assert_allclose((dy * _direct(u, w, geom)).sum(), (dx1 * u).sum(), rtol=1e-9)


WIDE = (2, 2, 8, (3, 40), 8, 3, 1, 1, 1, 1)  # 40 -> 42 wide: within WIDE_MAX_EXTRA
TAPS = (2, 2, 32, (5, 6), 32, 3, 1, 1, 1, 1)  # 32x32 weight blocks: the weight grad by taps


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize(
    "route, case, what",
    [
        # where junk meets a non-finite value: these fail without the exact recompute
        ("wide columns", WIDE, "inf in x"),
        ("shifted taps", TAPS, "inf in x"),
        ("transposed, wide", WIDE, "inf in dy"),
        ("transposed, wide", WIDE, "nan in dy"),
        # guards: dy meets only real pixels of x here, and batched columns hold no junk
        ("wide columns", WIDE, "nan in dy"),
        ("batched", WIDE, "inf in x"),
    ],
)
def test_a_non_finite_value_makes_nan_exactly_where_the_definition_does(
    rng, monkeypatch, force_layout, routes_non_finite_like_the_definition, route, case, what
):
    """Wide columns and shifted taps read past each row's end, values that meet the other
    side's widening zeros: an inf or NaN there must not become NaN in taps the definition's sum
    never reaches (the weight gradient is computed again from exact columns)."""
    force_layout(route == "batched")
    geom, x, w = _case(rng, *case)
    dy = rng.standard_normal((x.shape[0], w.shape[0], *geom.out_size(x.shape[2:])))
    taps_used = []
    real = conv_module.weight_grad_chunk
    monkeypatch.setattr(
        conv_module, "weight_grad_chunk", lambda *a: taps_used.append(1) or real(*a)
    )
    if route.startswith("transposed"):
        # a transposed convolution's weight gradient is this one's with the roles swapped:
        # its output gradient (here ``dy``'s place, shape of x) is what the columns are of
        def weight_grad(ys, xs):
            return conv_any_backward(ys, xs, w, geom, True, need_dx=False, need_dw=True)[1]

        what = "inf in x" if what == "inf in dy" else "nan in x"
        routes_non_finite_like_the_definition(x, dy, geom, what, weight_grad, shared=True)
    else:

        def weight_grad(xs, dys):
            return conv_backward(dys, xs, w, geom, need_dx=False)[1]

        routes_non_finite_like_the_definition(x, dy, geom, what, weight_grad, shared=True)
    assert bool(taps_used) == (route == "shifted taps")  # the route the name says was taken
    if route != "batched":
        assert column_layout(x.shape[2:], geom, w.shape)[0] or route == "shifted taps"


# transposed geometries with output_padding >= stride on some axis (allowed below the dilation):
# (nd, k, stride, padding, dilation, output_padding, groups, input size)
BEYOND_STRIDE = [
    (2, 3, 1, 1, 2, (1, 1), 1, (5, 4)),
    (2, 3, (1, 2), 1, (3, 1), (2, 1), 2, (5, 6)),  # on one axis only, grouped
    (1, 1, 1, 2, 7, (6,), 1, (1,)),  # the padding wider than the rows the input reaches
]


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("what", ["inf in dy", "nan in dy"])
@pytest.mark.parametrize("case", BEYOND_STRIDE)
def test_transposed_output_padding_weight_grad_has_nan_only_where_the_definition_does(
    rng, force_layout, routes_non_finite_like_the_definition, batched, what, case
):
    """With output_padding >= stride the transposed convolution's output gradient reaches one
    row past the layer's input, whose widening zeros stand for pixels that do not exist: an
    inf there met them as ``inf * 0 = NaN`` in the weight gradient, where the definition
    (and PyTorch) sum no such product."""
    force_layout(batched)
    nd, k, s, p, d, op, g, size = case
    geom = ConvGeometry.make(nd, k, s, p, d, g)
    x = rng.standard_normal((2, 4, *size))  # the transposed layer's input
    w = rng.standard_normal((4, 6 // g, *geom.ksize))  # (in, out/groups, *k), PyTorch's layout
    out = geom.transpose_out_size(x.shape[2:], op)
    dy = rng.standard_normal((2, 6, *out))
    assert geom.out_size(out) != tuple(x.shape[2:])  # the adjoint does reach past the input

    def weight_grad(ys, xs):  # the fixture's roles: ``ys`` holds the value, ``xs`` is x
        return conv_any_backward(ys, xs, w, geom, True, need_dx=False, need_dw=True)[1]

    what = "inf in x" if what == "inf in dy" else "nan in x"
    routes_non_finite_like_the_definition(dy, x, geom, what, weight_grad, shared=True)


@pytest.mark.parametrize("case", CASES[:2])
def test_layouts_match_torch_float32(torch, rng, layout, case):
    nd, n, c, sp, o, k, s, p, d, g = case
    geom, x, w = _case(rng, *case)
    x, w = x.astype(np.float32), w.astype(np.float32)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, None, s, p, d, g)
    dy = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(dy))
    y, _ = conv_forward(x, w, geom)
    dx, dw = conv_backward(dy, x, w, geom)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("batched", [False, True])
def test_bitwise_the_same_for_1_2_3_threads(rng, monkeypatch, force_layout, batched, pool_use):
    """Chunks and layout depend on the shapes alone: any thread count gives the same bits."""
    force_layout(batched)
    monkeypatch.setattr("distconv.kernels.parallel.MIN_WORK_PER_THREAD", 1)
    # 7200 column elements a sample: chunks of two samples, so the batched layout multiplies
    # several samples' columns at once on the pool
    monkeypatch.setattr("distconv.kernels.parallel.CHUNK_WORK", 16000)
    monkeypatch.delenv("DISTCONV_AUTOTUNE", raising=False)
    submitted = pool_use
    geom = ConvGeometry.make(2, 3, 1, 1)
    x = rng.standard_normal((16, 8, 10, 10)).astype(np.float32)
    w = rng.standard_normal((12, 8, 3, 3)).astype(np.float32)
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
        y, _ = conv_forward(x, w, geom)
        dy = np.cos(y)
        results.append((y, *conv_backward(dy, x, w, geom)))
        assert bool(submitted) == (threads != "1")  # the chunks really ran on the pool
        submitted.clear()
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_wide_columns_only_where_they_outweigh_the_output_and_barely_lengthen_it():
    geom = ConvGeometry.make(2, 3, 1, 1)
    assert column_layout((28, 28), geom, (32, 1, 3, 3)) == (False, (28, 28))  # LeNet's conv1
    assert column_layout((56, 56), geom, (64, 32, 3, 3)) == (True, (56, 58))
    # LeNet's conv2: 14 -> 16 (and 4 -> 6 on the digits) would lengthen every product
    assert column_layout((14, 14), geom, (64, 32, 3, 3)) == (False, (14, 14))
    assert column_layout((4, 4), geom, (64, 32, 3, 3)) == (False, (4, 4))
    # the boundary: 20 -> 22 is a tenth longer and stays wide, 19 -> 21 is more
    assert column_layout((20, 20), geom, (64, 32, 3, 3)) == (True, (20, 22))
    assert column_layout((19, 19), geom, (64, 32, 3, 3)) == (False, (19, 19))
    assert column_layout((4, 4), geom) == (True, (4, 6))  # no weight: a filter bank per sample
    geom3 = ConvGeometry.make(3, 3, 1, 1)  # measured in 2-D only: 3-D keeps wide columns
    assert column_layout((4, 4, 4), geom3, (64, 32, 3, 3, 3)) == (True, (4, 4, 6))
    assert column_layout((56, 56), ConvGeometry.make(2, 3, 2, 1), (64, 32, 3, 3))[0] is False


def test_cost_model_depends_on_the_output_size_alone():
    small, large = (14, 14), (56, 56)
    for direction in ("fwd", "dw", "dx"):
        assert use_batched(small, 32 * 9, direction)
        assert not use_batched(large, 32 * 9, direction)
        assert not use_batched(small, 1 * 9, direction)  # LeNet's first layer


def test_autotuner_times_each_shape_once_and_stays_correct(rng, monkeypatch):
    """The first call of a shape times both layouts (each twice) in every direction; the
    second runs the chosen one once; results agree with the untuned kernels."""
    monkeypatch.setattr(conv_layout, "_tuned", {})
    geom = ConvGeometry.make(2, 3, 1, 1)
    x = rng.standard_normal((4, 3, 6, 6))
    w = rng.standard_normal((5, 3, 3, 3))
    monkeypatch.delenv("DISTCONV_AUTOTUNE", raising=False)
    y_ref, _ = conv_forward(x, w, geom)
    dx_ref, dw_ref = conv_backward(np.cos(y_ref), x, w, geom)
    monkeypatch.setenv("DISTCONV_AUTOTUNE", "1")
    runs: list[int] = []
    real = conv_layout.over_batch
    monkeypatch.setattr(conv_layout, "over_batch", lambda *a, **k: runs.append(1) or real(*a, **k))
    counts = []
    for _ in range(2):
        runs.clear()
        y, _ = conv_forward(x, w, geom)
        dx, dw = conv_backward(np.cos(y), x, w, geom)
        counts.append(len(runs))
        np.testing.assert_allclose(y, _direct(x, w, geom), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(dx, dx_ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dw, dw_ref, rtol=1e-12, atol=1e-12)
    assert {key[0] for key in conv_layout._tuned} == {"fwd", "dw", "dx"}
    assert counts[0] >= 3 * 4  # A B B A in each of the three directions
    assert counts[1] == 3  # then one run each, the chosen layout


@pytest.mark.parametrize("slow", [False, True])
def test_autotuner_keeps_the_faster_layout(rng, monkeypatch, slow):
    # make one layout far slower than the other: the tuner must keep the other, every direction
    import time

    monkeypatch.setenv("DISTCONV_AUTOTUNE", "1")
    monkeypatch.setattr(conv_layout, "_tuned", {})
    real_run_chunks = conv_layout.run_chunks

    def run_chunks(run, direction, x, w, geom, work):
        def delayed(a, b, batched):
            if batched == slow:
                time.sleep(0.05)
            return run(a, b, batched)

        return real_run_chunks(delayed, direction, x, w, geom, work)

    import distconv.kernels.conv as conv_module

    monkeypatch.setattr(conv_module, "run_chunks", run_chunks)
    geom = ConvGeometry.make(2, 3, 1, 1)
    x, w = rng.standard_normal((4, 3, 6, 6)), rng.standard_normal((5, 3, 3, 3))
    y, _ = conv_forward(x, w, geom)
    first = conv_backward(np.ones_like(y), x, w, geom)
    assert conv_layout._tuned and set(conv_layout._tuned.values()) == {not slow}
    # the tuning call returns what every later call gives, bit for bit
    np.testing.assert_array_equal(conv_forward(x, w, geom)[0], y)
    for a, b in zip(conv_backward(np.ones_like(y), x, w, geom), first):
        np.testing.assert_array_equal(a, b)


def test_autotune_flag_must_be_0_or_1(monkeypatch):
    monkeypatch.setenv("DISTCONV_AUTOTUNE", "yes")
    with pytest.raises(ValueError, match="DISTCONV_AUTOTUNE must be 0 or 1, got 'yes'"):
        conv_layout.autotune_enabled()


# "1_0" and "١" were read by int() as 10 and 1
@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5", "1_0", "\u0661"])
def test_bad_thread_count_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("DISTCONV_NUM_THREADS", value)
    with pytest.raises(
        ValueError, match=f"DISTCONV_NUM_THREADS must be an integer >= 1, got '{value}'"
    ):
        num_threads()


def test_a_lenet_step_stays_float32(rng, monkeypatch):
    """No float64 upcast in a training step: no array into or out of the step's kernels,
    activations and optimizer (a float64 array cast back by ``+=`` would hide in the end
    results), and Args, gradients, parameters and Adam state. A temporary inside one of them,
    or inside the loss, is not seen."""
    import functools

    import distconv.layers.conv as conv_layer
    import distconv.layers.fc as fc_layer
    import distconv.layers.pool as pool_layer
    from distconv import Arg
    from distconv.kernels import activation
    from distconv.models import lenet
    from distconv.optim import Adam
    from distconv.sync.local import LocalSync

    wrong: list[tuple[str, object]] = []
    called: set[str] = set()

    def watch(owner, name):
        real = getattr(owner, name)

        @functools.wraps(real)
        def watched(*args, **kwargs):
            result = real(*args, **kwargs)
            called.add(f"{getattr(owner, '__name__', owner)}.{name}")
            results = result if isinstance(result, tuple) else (result,)
            for v in (*args, *kwargs.values(), *results):
                if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.dtype != np.float32:
                    wrong.append((name, v.dtype))
            return result

        monkeypatch.setattr(owner, name, watched)

    for owner, name in [
        (conv_layer, "conv_any_forward"),
        (conv_layer, "conv_any_backward"),
        (conv_layer, "channel_sums"),
        (pool_layer, "max_pool_forward"),
        (pool_layer, "max_pool_backward"),
        (fc_layer, "matmul"),
        (activation.ReLU, "forward"),
        (activation.ReLU, "backward"),
        (activation.Linear, "forward"),
        (activation.Linear, "backward"),
        (Adam, "_apply"),
    ]:
        watch(owner, name)
    net = lenet((1, 8, 8))
    sync = LocalSync(Adam(1e-3))
    sync.setup([p for p in net.parameters() if not p.static], {})
    x = rng.standard_normal((6, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, 6)
    # one step as the trainer runs it, through the sync contract
    sync.start_step(6)
    net.forward({"image": Arg(x, needs_grad=False), "label": Arg(ids=y, needs_grad=False)})
    net.backward(sync, loss="loss", loss_scale=6)
    sync.finish_step()
    for name, arg in net.outputs.items():
        if arg.value is not None:
            assert arg.value.dtype == np.float32, name
        if arg.has_grad:
            assert arg.grad.dtype == np.float32, name
    for p in net.parameters():
        assert p.value.dtype == p.grad.dtype == np.float32, p.name
        for key, buf in sync.state[p.name].items():
            assert key == "step" or buf.dtype == np.float32, (p.name, key)
    assert not wrong
    assert len(called) == 11  # every watched entry point ran


@pytest.mark.parametrize("name", ["relu", "tanh", "linear", "sigmoid", "softmax"])
def test_activation_in_place_gives_the_same_output(rng, name):
    """What a layer that owns its pre-activation buffer gets with ``inplace=True``."""
    from distconv.kernels.activation import get_activation

    act = get_activation(name)
    z = rng.standard_normal((4, 6)).astype(np.float32)
    expected = act.forward(z.copy())
    buf = z.copy()
    got = act.forward(buf, inplace=True)
    np.testing.assert_array_equal(got, expected)
    if name in ("relu", "tanh", "linear"):
        assert got is buf  # no temporary


@pytest.mark.parametrize("case", [c for c in CASES if c[-1] == 1])
def test_dense_input_gradient_matches_col2im(rng, monkeypatch, case):
    """The dense form of the input gradient (tiny images) against the col2im path."""
    geom, x, w = _case(rng, *case)
    dy = rng.standard_normal((x.shape[0], w.shape[0], *geom.out_size(x.shape[2:])))
    monkeypatch.setattr(conv_layout, "DENSE_MAX_WORK_RATIO", 0)
    expected = conv_backward_data(dy, w, geom, x.shape)
    monkeypatch.setattr(conv_layout, "DENSE_MAX_WORK_RATIO", 10**9)
    monkeypatch.setattr(conv_layout, "DENSE_MIN_BATCH", 1)
    assert conv_layout.dense_pays(len(x), tuple(dy.shape[2:]), tuple(x.shape[2:]), w.shape, geom)
    np.testing.assert_allclose(
        conv_backward_data(dy, w, geom, x.shape), expected, rtol=1e-10, atol=1e-10
    )


def test_dense_only_for_tiny_images():
    geom = ConvGeometry.make(2, 3, 1, 1)
    assert conv_layout.dense_pays(128, (4, 4), (4, 4), (64, 32, 3, 3), geom)  # LeNet conv2, digits
    assert not conv_layout.dense_pays(64, (4, 4), (4, 4), (64, 32, 3, 3), geom)  # too few samples
    assert not conv_layout.dense_pays(64, (8, 8), (8, 8), (32, 1, 3, 3), geom)
    grouped = ConvGeometry.make(2, 3, 1, 1, 1, 2)
    assert not conv_layout.dense_pays(64, (4, 4), (4, 4), (8, 8, 3, 3), grouped)


@pytest.mark.parametrize("kinds", ["bfloat16", "float32 float64"])
def test_the_dense_input_gradient_comes_out_in_the_type_the_other_routes_give(kinds):
    """The dense product returned its matmul's type: float32 for bfloat16 (so a bfloat16
    ConvTranspose2D's output was float32 from 128 samples on and bfloat16 below), float64 for
    a float32 gradient by a float64 weight. The col2im routes give the gradient's type."""
    from distconv import Arg
    from distconv.layers import ConvTranspose2D

    types = [
        pytest.importorskip("ml_dtypes").bfloat16 if k == "bfloat16" else k for k in kinds.split()
    ]
    layer = ConvTranspose2D(8, 4, 3, dtype=types[-1])
    x = np.random.default_rng(0).standard_normal((128, 8, 2, 2)).astype(types[0])
    geom, out = layer.geom, (128, 4, 4, 4)
    assert conv_layout.dense_pays(128, (2, 2), (4, 4), layer.weight.shape, geom)  # the route
    small, large = layer(Arg(x[:127])).value, layer(Arg(x)).value  # col2im, then dense
    # the layer computes in result_type(input, weight), as a fully connected layer does
    assert small.dtype == large.dtype == np.result_type(*(np.dtype(t) for t in types))
    # bfloat16 keeps 8 bits; a float64 result of float32 inputs agrees to float64's rounding
    tol = 1e-2 if kinds == "bfloat16" else 1e-12
    np.testing.assert_allclose(
        large[:127].astype(np.float64), small.astype(np.float64), rtol=tol, atol=tol
    )
    assert conv_backward_data(x, layer.weight.value, geom, out).dtype == np.dtype(types[0])


@pytest.mark.parametrize(
    "shape",
    # LeNet's conv1 and conv2 at 28x28; a larger image; a batch of one (not split at all)
    [((64, 1, 28, 28), 32), ((64, 32, 14, 14), 64), ((8, 64, 28, 28), 64), ((1, 64, 56, 56), 64)],
)
def test_real_layer_sizes_are_bitwise_the_same_for_1_and_2_threads(rng, monkeypatch, shape):
    """Sizes where BLAS itself would thread: every path must hold it to one thread. BLAS is
    allowed 1 thread in one run and 4 in the other, so a kernel that let it thread would give
    other bits (a product's bits depend on how many threads split it)."""
    from threadpoolctl import threadpool_limits

    (n, c, h, w_), k = shape
    monkeypatch.delenv("DISTCONV_AUTOTUNE", raising=False)
    geom = ConvGeometry.make(2, 3, 1, 1)
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    results = []
    for threads, blas in (("1", 1), ("2", 4)):
        monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
        with threadpool_limits(limits=blas, user_api="blas"):
            y, _ = conv_forward(x, w, geom)
            results.append((y, *conv_backward(np.cos(y), x, w, geom)))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "x_shape,w_shape,groups",
    [
        ((4, 32, 4, 4), (64, 32, 3, 3), 1),  # columns (288 rows) outnumber dy's 64: turned round
        ((4, 4, 4, 4), (64, 4, 3, 3), 1),  # 36 rows against 64: the product as written
        ((4, 64, 4, 4), (64, 16, 3, 3), 4),
        ((300, 32, 4, 4), (64, 32, 3, 3), 1),  # several chunks summed
    ],
)
def test_the_weight_gradient_is_plain_memory(rng, x_shape, w_shape, groups):
    """The batched product may be computed transposed; the gradient handed out is contiguous
    (MPI buffers and reshape(-1) views rely on it) and equals the product as written."""
    geom = ConvGeometry.make(2, 3, 1, 1, 1, groups)
    assert use_batched(geom.out_size(x_shape[2:]), w_shape[1] * 9, "dw")
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    dy = rng.standard_normal((x_shape[0], w_shape[0], *x_shape[2:]))
    _, dw = conv_backward(dy, x, w, geom, need_dx=False)
    assert dw.flags.c_contiguous and dw.shape == w.shape
    cols = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3)
    )  # (N, C, H, W, 3, 3)
    g = groups
    cols = cols.reshape(x_shape[0], g, x_shape[1] // g, *x_shape[2:], 3, 3)
    dyg = dy.reshape(x_shape[0], g, w_shape[0] // g, *x_shape[2:])
    expected = np.einsum("ngohw,ngchwij->gocij", dyg, cols).reshape(w_shape)
    np.testing.assert_allclose(dw, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n, k, size", [(4096, 1, 2), (4096, 3, 6), (64, 1, 32)])
def test_a_16_bit_weight_gradient_sums_the_batch_in_float32(dtype, n, k, size):
    """The per-sample layout summed its samples' products, and the chunks' partials, in the
    weight's type: float16 drifted and stopped growing (1024 for 1638), as every
    other batch sum did before it took float32 (``sum_dtype``). The result keeps ``w``'s type."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    geom = ConvGeometry((k, k), (1, 1), (0, 0), (1, 1))
    x = np.ones((n, 1, size, size), dtype)
    w = np.ones((2, 1, k, k), dtype)
    dy = np.full((n, 2, size - k + 1, size - k + 1), 0.1, dtype)
    _, dw = conv_forward(x, w, geom, dw_from=dy, want_y=False)
    as_f64 = [a.astype(np.float64) for a in (x, w, dy)]
    _, want = conv_forward(*as_f64[:2], geom, dw_from=as_f64[2], want_y=False)
    assert dw.dtype == w.dtype
    # the sum is exact; what is left is one rounding of it to 16 bits (8 bits of bfloat16)
    np.testing.assert_allclose(dw.astype(np.float64), want, rtol=2**-8)
