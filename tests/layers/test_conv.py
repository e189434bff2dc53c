import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.kernels import conv_columns
from distconv.layers import Conv2D, Conv3D, ConvTranspose2D, ConvTranspose3D, LayerError


@pytest.fixture(autouse=True, params=["default", "wide"])
def column_rule(request, monkeypatch):
    """Each test runs twice: with the layout rule as shipped (small images take exact columns)
    and with wide columns wherever they apply, the layout large images take."""
    if request.param == "wide":
        monkeypatch.setattr(conv_columns, "WIDE_MAX_EXTRA", float("inf"))
    return request.param


F64 = np.float64
OPTIONS = [
    # kernel, stride, padding, dilation, groups, bias, act
    (3, 1, 0, 1, 1, "shared", None),
    (3, 1, 1, 1, 1, None, "relu"),
    (3, 2, 1, 1, 2, "shared", "tanh"),
    ((2, 3), (1, 2), (1, 0), 1, 1, "shared", "sigmoid"),
    (3, 1, 2, 2, 1, "unshared", None),
    (2, 3, 1, (2, 1), 4, "unshared", "softmax"),
    (1, 1, 0, 1, 4, None, "linear"),  # depthwise-style pointwise groups
]


@pytest.mark.parametrize("k,s,p,d,g,bias,act", OPTIONS)
def test_conv2d_gradients(rng, k, s, p, d, g, bias, act):
    layer = Conv2D(4, 8, k, s, p, d, g, bias=bias, act=act, input_size=(7, 8), dtype=F64)
    x = Arg(rng.standard_normal((2, 4, 7, 8)))
    report = check_layer_grad(layer, [x])
    assert report.worst < 1e-6
    assert set(report.diffs) >= {"input 0", f"param {layer.name}.weight"}


@pytest.mark.parametrize("k,s,p,d,g,bias,act", OPTIONS)
def test_conv_transpose2d_gradients(rng, k, s, p, d, g, bias, act):
    layer = ConvTranspose2D(4, 8, k, s, p, d, g, bias=bias, act=act, input_size=(5, 4), dtype=F64)
    x = Arg(rng.standard_normal((2, 4, 5, 4)))
    assert check_layer_grad(layer, [x]).worst < 1e-6


def test_conv_transpose2d_output_padding_gradients(rng):
    layer = ConvTranspose2D(3, 2, 3, stride=2, padding=1, output_padding=1, dtype=F64)
    x = Arg(rng.standard_normal((2, 3, 4, 4)))
    assert layer(x).shape == (2, 2, 8, 8)
    check_layer_grad(layer, [x])


def test_conv2d_float32_gradients(rng):
    # a smooth activation: float32 needs a step (1e-3) wide enough to cross ReLU kinks
    layer = Conv2D(3, 4, 3, padding=1, act="tanh")
    x = Arg(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    assert check_layer_grad(layer, [x]).worst <= 0.02


@pytest.mark.parametrize("cls", [Conv3D, ConvTranspose3D])
@pytest.mark.parametrize(
    "k,s,p,g,bias", [(3, 1, 1, 1, "shared"), ((1, 2, 3), (2, 1, 2), (0, 1, 1), 2, "unshared")]
)
def test_conv3d_gradients(rng, cls, k, s, p, g, bias):
    layer = cls(2, 4, k, s, p, groups=g, bias=bias, input_size=(4, 5, 4), dtype=F64)
    x = Arg(rng.standard_normal((2, 2, 4, 5, 4)))
    check_layer_grad(layer, [x], elements=3)


def test_input_without_gradient_is_left_alone(rng):
    """An input that needs no gradient gets none, and the parameters' gradients are those of
    the same layer whose input does need one: skipping the input's gradient skips nothing else."""
    x_value = rng.standard_normal((1, 2, 5, 5))
    out_grad = rng.standard_normal((1, 3, 3, 3))
    layers = []
    for needs_grad in (False, True):
        layer = Conv2D(2, 3, 3, dtype=F64)
        for mine, first in zip(layer.parameters(), layers[0].parameters() if layers else ()):
            mine.value[...] = first.value
        x = Arg(x_value.copy(), needs_grad=needs_grad)
        layer(x)
        layer.output.grad = out_grad.copy()
        layer.backward(lambda p: None)
        assert x.has_grad is needs_grad
        layers.append(layer)
    skipped, full = layers
    assert np.abs(skipped.weight.grad).sum() > 0
    np.testing.assert_array_equal(skipped.weight.grad, full.weight.grad)
    for a, b in zip(skipped.parameters(), full.parameters(), strict=True):
        np.testing.assert_array_equal(a.grad, b.grad)


# -- errors -------------------------------------------------------------------------------------
def test_wrong_channel_count_names_layer_and_shapes():
    layer = Conv2D(3, 4, 3, name="conv1")
    with pytest.raises(
        LayerError, match=r"Conv2D 'conv1': expected 3 input channels, got 4 .*\(2, 4, 8, 8\)"
    ):
        layer(Arg(np.zeros((2, 4, 8, 8), np.float32)))


def test_kernel_larger_than_padded_input():
    layer = Conv2D(1, 1, 5, padding=1, name="c")
    with pytest.raises(
        LayerError, match=r"kernel \(5, 5\).*larger than the input \(2, 2\) padded by \(1, 1\)"
    ):
        layer(Arg(np.zeros((1, 1, 2, 2), np.float32)))


def test_bad_construction_arguments():
    with pytest.raises(ValueError, match="in_channels=3 must be a positive multiple of groups=2"):
        Conv2D(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="unshared bias needs input_size"):
        Conv2D(3, 4, 3, bias="unshared")
    # named as every other argument's error is: it was a plain ValueError naming no layer
    with pytest.raises(LayerError, match=r"^Conv2D 'c': bias must be one of"):
        Conv2D(3, 4, 3, bias="per-pixel", name="c")
    with pytest.raises(ValueError, match="output_padding"):
        ConvTranspose2D(3, 4, 3, stride=2, output_padding=2)
    with pytest.raises(LayerError, match="4-D input"):
        Conv2D(3, 4, 3)(Arg(np.zeros((3, 8, 8), np.float32)))


# -- parity with PyTorch --------------------------------------------------------------------------
def _torch_grads(torch, fn, x, w, b, dy):
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    tb = torch.tensor(b, requires_grad=True)
    y = fn(tx, tw, tb)
    y.backward(torch.tensor(dy))
    return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()


def _ours(layer, x, dy):
    xa = Arg(x)
    y = layer(xa).value.copy()
    layer.output.grad = dy
    layer.backward(lambda p: None)
    return y, xa.grad, layer.weight.grad, layer.bias.grad


PARITY = [(3, 1, 1, 1, 1), (3, 2, 1, 1, 2), (5, 2, 2, 2, 1), (3, 1, 1, 1, 6)]


@pytest.mark.parametrize("k,s,p,d,g", PARITY)
@pytest.mark.parametrize("nd,transposed", [(2, False), (2, True), (3, False), (3, True)])
def test_parity_with_pytorch(torch, rng, k, s, p, d, g, nd, transposed):
    import torch.nn.functional as F

    cls = {
        (2, False): Conv2D,
        (2, True): ConvTranspose2D,
        (3, False): Conv3D,
        (3, True): ConvTranspose3D,
    }[(nd, transposed)]
    layer = cls(6, 12, k, s, p, d, g, dtype=F64)
    layer.bias.value[...] = rng.standard_normal(12)
    size = (9,) * nd if nd == 2 else (6,) * nd
    x = rng.standard_normal((3, 6, *size))
    if transposed:
        fn = {2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
        op = (0,) * nd

        def ref(tx, tw, tb):
            return fn(tx, tw, tb, stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    else:
        fn = {2: F.conv2d, 3: F.conv3d}[nd]

        def ref(tx, tw, tb):
            return fn(tx, tw, tb, stride=s, padding=p, dilation=d, groups=g)

    y_ref = ref(*(torch.tensor(a) for a in (x, layer.weight.value, layer.bias.value))).numpy()
    dy = rng.standard_normal(y_ref.shape)
    expected = _torch_grads(torch, ref, x, layer.weight.value, layer.bias.value, dy)
    for got, want, what in zip(_ours(layer, x, dy), expected, ("y", "dx", "dw", "db")):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9, err_msg=what)


def test_depthwise_conv2d_parity(torch, rng):
    import torch.nn.functional as F

    layer = Conv2D(8, 8, 3, padding=1, groups=8, dtype=F64)
    x = rng.standard_normal((2, 8, 7, 7))
    dy = rng.standard_normal((2, 8, 7, 7))

    def ref(tx, tw, tb):
        return F.conv2d(tx, tw, tb, padding=1, groups=8)

    expected = _torch_grads(torch, ref, x, layer.weight.value, layer.bias.value, dy)
    for got, want in zip(_ours(layer, x, dy), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize(
    "nd,k,s,p,d,op,g",
    [
        (2, 3, 2, 1, 1, 1, 1),
        (2, 2, 1, 1, 2, 1, 1),  # output_padding >= stride, allowed because < dilation
        (2, 3, (1, 2), 1, (3, 1), (2, 1), 2),
        (3, 3, 2, 1, 2, (1, 0, 1), 2),
        (3, 2, 1, 0, 2, 1, 1),
    ],
)
def test_conv_transpose_output_padding_parity(torch, rng, layout, nd, k, s, p, d, op, g):
    """In both layouts: with output_padding >= stride the input is a row short of the
    adjoint's output size, and both col2im forms must take it so."""
    import torch.nn.functional as F

    cls = ConvTranspose2D if nd == 2 else ConvTranspose3D
    layer = cls(4, 6, k, s, p, d, g, output_padding=op, dtype=F64)
    layer.bias.value[...] = rng.standard_normal(6)
    x = rng.standard_normal((2, 4) + ((5, 6) if nd == 2 else (3, 4, 3)))
    fn = F.conv_transpose2d if nd == 2 else F.conv_transpose3d

    def ref(tx, tw, tb):
        return fn(tx, tw, tb, stride=s, padding=p, output_padding=op, groups=g, dilation=d)

    y_ref = ref(*(torch.tensor(a) for a in (x, layer.weight.value, layer.bias.value)))
    dy = rng.standard_normal(tuple(y_ref.shape))
    expected = _torch_grads(torch, ref, x, layer.weight.value, layer.bias.value, dy)
    for got, want, what in zip(_ours(layer, x, dy), expected, ("y", "dx", "dw", "db")):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9, err_msg=what)
    check_layer_grad(layer, [Arg(x)], elements=3)


def test_conv_transpose_padding_wider_than_the_input_reaches_parity(torch, rng, layout):
    """A kernel of 1 with a large dilation lets output_padding reach 6 at stride 1; with
    padding 2 the whole output on that axis lies outside what the one input row reaches, so
    the output is the bias alone there and both gradients are zero (the backward once failed
    to broadcast here)."""
    import torch.nn.functional as F

    k, s, p, d, op = (1, 3), 1, (2, 1), (7, 1), (6, 0)
    layer = ConvTranspose2D(4, 6, k, s, p, d, output_padding=op, dtype=F64)
    layer.bias.value[...] = rng.standard_normal(6)
    x = rng.standard_normal((2, 4, 1, 5))

    def ref(tx, tw, tb):
        return F.conv_transpose2d(tx, tw, tb, stride=s, padding=p, output_padding=op, dilation=d)

    y_ref = ref(*(torch.tensor(a) for a in (x, layer.weight.value, layer.bias.value)))
    dy = rng.standard_normal(tuple(y_ref.shape))
    expected = _torch_grads(torch, ref, x, layer.weight.value, layer.bias.value, dy)
    for got, want, what in zip(_ours(layer, x, dy), expected, ("y", "dx", "dw", "db")):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9, err_msg=what)


def test_output_padding_out_of_range_is_refused():
    with pytest.raises(LayerError, match=r"output_padding=\(2, 2\) must be >= 0 and smaller than"):
        ConvTranspose2D(1, 1, 3, stride=2, output_padding=2)
    with pytest.raises(LayerError, match="only for transposed"):
        Conv2D(1, 1, 3, stride=2, output_padding=1)
    with pytest.raises(ValueError, match=r"kernel_size must be an int or 2 ints, got 3.0"):
        Conv2D(3, 4, 3.0)


def test_conv_transpose_projection_checks_output_padding():
    from distconv.layers import ConvTransposeProjection

    with pytest.raises(LayerError, match="output_padding=.* must be >= 0 and smaller than"):
        ConvTransposeProjection(1, 1, 1, input_size=3, stride=1, output_padding=3)


def test_bias_and_act_may_follow_groups_positionally():
    layer = Conv2D(4, 8, 3, 1, 0, 1, 1, None, "relu")
    assert layer.bias is None and layer.act is not None
    with pytest.raises(TypeError):
        Conv2D(4, 8, 3, 1, 0, 1, 1, None, "relu", "msra")  # init is keyword-only


@pytest.mark.parametrize("act", ["relu", "tanh"])
@pytest.mark.parametrize("kind", ["conv", "fc"])
def test_the_activation_runs_in_the_layers_own_output_buffer(rng, monkeypatch, kind, act):
    """A convolution or fully connected layer owns its fresh pre-activation: the activation
    writes over it instead of making another array (and gives the same values)."""
    from distconv.layers import FullyConnected

    if kind == "conv":
        layer = Conv2D(3, 4, 3, padding=1, act=act)
        x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    else:
        layer = FullyConnected(6, 4, act=act)
        x = rng.standard_normal((2, 6)).astype(np.float32)
    fresh = []
    real = type(layer)._forward
    monkeypatch.setattr(
        type(layer), "_forward", lambda self, *a: fresh.append(real(self, *a)) or fresh[-1]
    )
    out = layer(Arg(x)).value
    assert out is fresh[0] or np.shares_memory(out, fresh[0])
    z = real(layer, Arg(x))
    np.testing.assert_array_equal(out, layer.act.forward(z))


@pytest.mark.parametrize("kind", ["conv", "fc"])
def test_the_first_input_gradient_is_the_kernels_array_and_later_ones_add(rng, monkeypatch, kind):
    """No zero-filled buffer to add the first input gradient into: it is the array the kernel
    made. A second consumer of the same input (two layers on one Arg) adds its own, and the
    input's gradient is the sum of both."""
    import distconv.layers.conv as conv_layer
    import distconv.layers.fc as fc_layer
    from distconv.layers import FullyConnected

    made = []
    owner, name = (conv_layer, "conv_any_backward") if kind == "conv" else (fc_layer, "matmul")
    real = getattr(owner, name)
    monkeypatch.setattr(owner, name, lambda *a: made.append(real(*a)) or made[-1])
    if kind == "conv":
        layers = [Conv2D(3, 4, 3, padding=1, dtype=np.float64) for _ in range(2)]
        value = rng.standard_normal((2, 3, 5, 5))
    else:
        layers = [FullyConnected(6, 4, dtype=np.float64) for _ in range(2)]
        value = rng.standard_normal((2, 6))
    x, alone = Arg(value), []
    for k, layer in enumerate(layers):
        dy = rng.standard_normal(layer(Arg(value)).value.shape)
        layer.output.grad = dy
        layer.backward(lambda p: None)
        alone.append(layer.inputs[0].grad.copy())  # this layer's gradient on its own
        layer(x)
        layer.output.grad = dy
        made.clear()
        layer.backward(lambda p: None)
        if k == 0:
            dx = made[0][0] if kind == "conv" else made[0]
            assert np.shares_memory(x.grad, dx)
    np.testing.assert_allclose(x.grad, alone[0] + alone[1], rtol=1e-12, atol=1e-12)


def test_a_gradient_of_another_dtype_or_read_only_is_added_not_taken(rng):
    """The input keeps its own gradient buffer where the kernel's array would not fit it."""
    from distconv.layers.inputs import add_grad

    x = Arg(rng.standard_normal((2, 6)).astype(np.float16))
    g = rng.standard_normal((2, 6)).astype(np.float32)
    add_grad(x, g)
    assert x.grad.dtype == np.float16 and not np.shares_memory(x.grad, g)
    np.testing.assert_allclose(x.grad, g.astype(np.float16))
    y = Arg(rng.standard_normal((2, 6)))
    frozen = rng.standard_normal((2, 6))
    frozen.flags.writeable = False
    add_grad(y, frozen)
    assert not np.shares_memory(y.grad, frozen)
    np.testing.assert_array_equal(y.grad, frozen)
    z = Arg(rng.standard_normal((6, 2)))
    strided = rng.standard_normal((2, 6)).T  # not C-contiguous
    add_grad(z, strided)
    assert not np.shares_memory(z.grad, strided) and z.grad.flags.c_contiguous


def test_a_gradient_whose_flags_have_no_writeable_is_taken(rng):
    """cupy's ``ndarray.flags`` has ``c_contiguous`` but no ``writeable`` (its arrays are never
    read-only): add_grad read it, and every convolution's and FC's input gradient on a GPU
    raised AttributeError. An array with such flags stands in for a cupy one here."""
    from types import SimpleNamespace

    from distconv.layers.inputs import add_grad

    class CupyLikeFlags(np.ndarray):
        @property
        def flags(self):
            return SimpleNamespace(c_contiguous=True, f_contiguous=False, owndata=True)

    x = Arg(rng.standard_normal((2, 6)))
    g = rng.standard_normal((2, 6)).view(CupyLikeFlags)
    add_grad(x, g)
    assert x.grad is g


@pytest.mark.parametrize("dtype", ["bfloat16", np.float16])
def test_an_unshared_bias_sums_a_16_bit_batch_in_float32(dtype):
    """dz.sum(axis=0) added the batch in the gradient's own type: over 4096 samples of 0.1 an
    unshared bias got 32 (bfloat16) or 256 (float16), not 409.6; a shared one was right."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    n = 4096
    for bias in ("unshared", "shared"):
        layer = Conv2D(1, 2, 1, bias=bias, input_size=(2, 2), dtype=dtype)
        y = layer(Arg(np.ones((n, 1, 2, 2), dtype), needs_grad=False)).value
        layer.output.grad = np.full(y.shape, 0.1, y.dtype)
        layer.backward(lambda p: None)
        per_sample = 0.1 * (1 if bias == "unshared" else 4)  # a shared bias sums 2x2 positions
        np.testing.assert_allclose(layer.bias.grad.astype(np.float64), per_sample * n, rtol=2**-7)
