import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.kernels.activation import get_activation
from distconv.layers import (
    Activation,
    AvgPool2D,
    AvgPool3D,
    Conv2D,
    Conv3D,
    ConvTranspose2D,
    FullyConnected,
    LayerError,
    MaxPool2D,
    MaxPool3D,
    MSELoss,
    SoftmaxCrossEntropy,
)
from distconv.layers.base import LayerTypeError

F64 = np.float64


@pytest.mark.parametrize("act", [None, "relu", "sigmoid", "tanh", "softmax", "linear"])
@pytest.mark.parametrize("bias", [True, False])
def test_fully_connected_gradients(rng, act, bias):
    layer = FullyConnected(12, 5, bias=bias, act=act, dtype=F64)
    check_layer_grad(layer, [Arg(rng.standard_normal((4, 12)))])


def test_fully_connected_flattens_images(rng):
    layer = FullyConnected(3 * 4 * 4, 6, dtype=F64)
    x = Arg(rng.standard_normal((2, 3, 4, 4)))
    assert layer(x).shape == (2, 6)
    check_layer_grad(layer, [x])


def test_fully_connected_wrong_width():
    with pytest.raises(
        LayerError,
        match=r"FullyConnected 'fc': expected 10 features per sample, got input shape \(2, 9\)",
    ):
        FullyConnected(10, 3, name="fc")(Arg(np.zeros((2, 9), np.float32)))


def test_fully_connected_fed_integer_ids_says_so():
    """An integer array reaches a layer as ids (the Trainer's feeds): it said "input shape
    None"."""
    with pytest.raises(LayerError, match=r"got integer ids \(an integer array is fed as ids"):
        FullyConnected(4, 3, name="fc")(Arg(ids=np.zeros(2, np.int64)))
    with pytest.raises(LayerError, match=r"got bool ids \(a bool array is fed as ids: cast"):
        FullyConnected(4, 3, name="fc")(Arg(ids=np.zeros(2, bool)))  # a mask feature


@pytest.mark.parametrize("cls", [MaxPool2D, AvgPool2D])
@pytest.mark.parametrize("k,s,p", [(2, None, 0), (3, 2, 1), ((2, 3), (1, 2), (1, 1))])
def test_pool2d_gradients(rng, cls, k, s, p):
    x = Arg(rng.standard_normal((2, 3, 7, 6)))
    check_layer_grad(cls(k, s, p), [x])


@pytest.mark.parametrize("cls", [MaxPool3D, AvgPool3D])
def test_pool3d_gradients(rng, cls):
    check_layer_grad(cls(2, 2, 1), [Arg(rng.standard_normal((2, 2, 4, 5, 3)))])


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softmax", "linear"])
def test_activation_layer_gradients(rng, act):
    check_layer_grad(Activation(act), [Arg(rng.standard_normal((3, 7)))])


@pytest.mark.filterwarnings("error::RuntimeWarning")  # inf * 0 warned, then gave NaN
def test_relu_routes_an_infinite_gradient_as_pytorch_does():
    """ReLU's backward was ``dy * (y > 0)``: an inf in dy at a unit that is off (here z = -1
    and the kink z = 0) came out NaN, where PyTorch's threshold_backward gives 0, and the NaN
    then reached every gradient below. A NaN unit passes its gradient on, as PyTorch's does."""
    x = Arg(np.array([[-1.0, 0.0, 2.0, np.nan, -3.0]]))
    layer = Activation("relu")
    layer(x)
    layer.output.grad = np.array([[np.inf, -np.inf, 1.0, 1.0, np.nan]])
    layer.backward(lambda p: None)
    np.testing.assert_array_equal(x.grad, [[0.0, 0.0, 1.0, 1.0, 0.0]])  # torch.relu's grads


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_relu_backward_chooses_bitwise_in_every_float_type(dtype):
    """The backward picks dy's bits or +0.0 through an unsigned view of dy's width: each
    float type, a non-contiguous dy, -0.0 and NaN units, as ``where(y <= 0, 0, dy)``."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    relu = get_activation("relu")
    y = np.array([[0.0, 1.0, np.nan, -0.0, 2.0, 0.5]], dtype).repeat(2, axis=0).T
    dy = np.array([[np.inf, np.inf, 3.0, np.nan, -np.inf, -0.0]], dtype).repeat(2, axis=0).T
    got = relu.backward(y, dy)  # transposed: not C-contiguous
    want = np.where(y <= 0, np.zeros((), dtype), dy)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_relu_backward_of_a_0d_unit_is_an_array_without_warning(dtype):
    """A 0-d output (an Activation on a scalar): ``y <= 0`` came out a numpy scalar, whose
    0 - 1 warned of an overflow at a unit that is on, and the gradient a scalar, not an array."""
    x = Arg(np.array(2.0, dtype))
    layer = Activation("relu")
    layer(x)
    layer.output.grad = np.array(3.0, dtype)
    layer.backward(lambda p: None)
    np.testing.assert_array_equal(x.grad, 3.0)
    relu = get_activation("relu")
    for y, want in ((2.0, 3.0), (-2.0, 0.0), (np.nan, 3.0)):
        got = relu.backward(np.array(y, dtype), np.array(3.0, dtype))
        assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == dtype
        assert got.view(f"u{got.itemsize}") == np.array(want, dtype).view(f"u{got.itemsize}")


def test_relu_backward_takes_a_number_as_the_gradient_of_a_0d_output():
    """``out.grad = 1.0`` is a gradient Arg takes for a 0-d value; ReLU's backward read
    ``dy.dtype`` and then ``dy.view`` of it and raised AttributeError, where tanh's took it."""
    for act in ("relu", "tanh", "linear"):
        x = Arg(np.array(2.0, np.float32))
        layer = Activation(act)
        layer(x)
        layer.output.grad = 1.0
        layer.backward(lambda p: None)
        assert x.grad.dtype == np.float32
    x = Arg(np.array(-2.0, np.float32))
    layer = Activation("relu")
    layer(x)
    layer.output.grad = 3.0
    layer.backward(lambda p: None)
    assert x.grad == 0.0 and x.grad.dtype == np.float32


def test_unknown_activation():
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        Activation("gelu")


def test_sigmoid_is_stable_for_large_inputs():
    y = Activation("sigmoid")(Arg(np.array([[-1000.0, 0.0, 1000.0]]))).value
    np.testing.assert_allclose(y, [[0.0, 0.5, 1.0]])


def test_softmax_cross_entropy_gradients(rng):
    logits = Arg(rng.standard_normal((5, 4)))
    labels = Arg(ids=np.array([0, 3, 1, 1, 2]))
    check_layer_grad(SoftmaxCrossEntropy(), [logits, labels])


def test_mse_gradients_on_both_inputs(rng):
    a, b = (Arg(rng.standard_normal((3, 4))) for _ in range(2))
    report = check_layer_grad(MSELoss(), [a, b])
    assert {"input 0", "input 1"} <= set(report.diffs)


def test_loss_errors():
    with pytest.raises(LayerError, match=r"labels must lie in \[0, 3\), got range \[0, 3\]"):
        SoftmaxCrossEntropy()(Arg(np.zeros((2, 3))), Arg(ids=np.array([0, 3])))
    with pytest.raises(LayerError, match="3 labels for a batch of 2 rows"):
        SoftmaxCrossEntropy()(Arg(np.zeros((2, 3))), Arg(ids=np.array([0, 1, 2])))
    with pytest.raises(LayerError, match="differs from target shape"):
        MSELoss()(Arg(np.zeros((2, 3))), Arg(np.zeros((3, 2))))
    with pytest.raises(LayerError, match="window .* larger than the input"):
        MaxPool2D(4)(Arg(np.zeros((1, 1, 3, 3))))


# -- parity with PyTorch --------------------------------------------------------------------------
# float64 on both sides differs only in the order of additions: rtol 1e-5 passed a layer whose
# backward multiplied in float32 (its rounding, 1e-7, is 100 times below 1e-5)
F64_PARITY = {"rtol": 1e-12, "atol": 1e-12}


def test_linear_parity(torch, rng):
    layer = FullyConnected(6, 4, dtype=F64)
    layer.bias.value[...] = rng.standard_normal(4)
    x = rng.standard_normal((3, 6))
    dy = rng.standard_normal((3, 4))
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(layer.weight.value, requires_grad=True)
    tb = torch.tensor(layer.bias.value, requires_grad=True)
    ty = torch.nn.functional.linear(tx, tw, tb)
    ty.backward(torch.tensor(dy))
    xa = Arg(x)
    np.testing.assert_allclose(layer(xa).value, ty.detach().numpy(), **F64_PARITY)
    layer.output.grad = dy
    layer.backward(lambda p: None)
    np.testing.assert_allclose(xa.grad, tx.grad.numpy(), **F64_PARITY)
    np.testing.assert_allclose(layer.weight.grad, tw.grad.numpy(), **F64_PARITY)
    np.testing.assert_allclose(layer.bias.grad, tb.grad.numpy(), **F64_PARITY)


@pytest.mark.parametrize(
    "kind,k,s,p", [("max", 2, 2, 0), ("max", 3, 2, 1), ("avg", 3, 2, 1), ("avg", 2, 1, 0)]
)
def test_pool_parity(torch, rng, kind, k, s, p):
    F = torch.nn.functional
    x = rng.standard_normal((2, 3, 7, 7))
    layer = (MaxPool2D if kind == "max" else AvgPool2D)(k, s, p)
    ref = F.max_pool2d if kind == "max" else F.avg_pool2d
    tx = torch.tensor(x, requires_grad=True)
    ty = ref(tx, k, s, p)
    dy = rng.standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(dy))
    xa = Arg(x)
    np.testing.assert_allclose(layer(xa).value, ty.detach().numpy(), **F64_PARITY)
    layer.output.grad = dy
    layer.backward(lambda p: None)
    np.testing.assert_allclose(xa.grad, tx.grad.numpy(), **F64_PARITY)


def test_loss_parity(torch, rng):
    F = torch.nn.functional
    z = rng.standard_normal((6, 5))
    ids = rng.integers(0, 5, 6)
    tz = torch.tensor(z, requires_grad=True)
    tl = F.cross_entropy(tz, torch.tensor(ids))
    tl.backward()
    za = Arg(z)
    layer = SoftmaxCrossEntropy()
    assert float(layer(za, Arg(ids=ids)).value) == pytest.approx(tl.item(), rel=1e-10)
    layer.output.grad = np.ones(())
    layer.backward(lambda p: None)
    np.testing.assert_allclose(za.grad, tz.grad.numpy(), **F64_PARITY)

    a, b = rng.standard_normal((2, 3, 4))
    ta = torch.tensor(a, requires_grad=True)
    tm = F.mse_loss(ta, torch.tensor(b))
    tm.backward()
    aa = Arg(a)
    mse = MSELoss()
    assert float(mse(aa, Arg(b, needs_grad=False)).value) == pytest.approx(tm.item(), rel=1e-10)
    mse.output.grad = np.ones(())
    mse.backward(lambda p: None)
    np.testing.assert_allclose(aa.grad, ta.grad.numpy(), **F64_PARITY)


def test_empty_batches_and_ids_only_inputs_get_clear_errors():
    with pytest.raises(LayerError, match="empty batch"):
        SoftmaxCrossEntropy()(Arg(np.zeros((0, 3))), Arg(ids=np.zeros(0, np.int64)))
    with pytest.raises(LayerError, match="got int64 ids"):
        MSELoss()(Arg(np.zeros((2, 3))), Arg(ids=np.array([0, 1])))
    # integer values, either side: refused in forward, not when backward adds float
    # gradients into them
    ints, floats = np.arange(6).reshape(2, 3), np.zeros((2, 3))
    for pred, target in ((ints, floats), (floats, ints)):
        with pytest.raises(LayerTypeError, match="MSELoss: expected float values, got int64"):
            MSELoss()(Arg(pred), Arg(target))
    # layers themselves pass an empty batch through
    assert FullyConnected(3, 2)(Arg(np.zeros((0, 3), np.float32))).shape == (0, 2)


def test_fully_connected_sums_several_inputs(rng):
    layer = FullyConnected((3, 2 * 2), 5, act="tanh", dtype=np.float64, name="fc")
    a, b = Arg(rng.standard_normal((4, 3))), Arg(rng.standard_normal((4, 2, 2)))
    w0, w1 = (w.value for w in layer.weights)
    want = np.tanh(a.value @ w0.T + b.value.reshape(4, 4) @ w1.T + layer.bias.value)
    np.testing.assert_allclose(layer(a, b).value, want, rtol=1e-12)
    report = check_layer_grad(layer, [a, b])
    assert {"param fc.weight0", "param fc.weight1", "input 0", "input 1"} <= set(report.diffs)


@pytest.mark.parametrize(("rows", "classes"), [(1500, 4), (8, 1000)])
def test_softmax_cross_entropy_of_bfloat16_logits_is_computed_in_float32(rows, classes):
    """numpy sums bfloat16 in bfloat16: 1500 rows of 1.39 averaged 0.34, and past a few
    hundred classes the softmax's normaliser stops growing too. The gradient comes back in
    bfloat16, the loss's value too."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(0)
    z = rng.standard_normal((rows, classes)).astype(ml_dtypes.bfloat16)
    label = Arg(ids=rng.integers(0, classes, rows))
    losses, grads = [], []
    for dtype in (ml_dtypes.bfloat16, np.float64):
        layer, x = SoftmaxCrossEntropy(), Arg(z.astype(dtype), needs_grad=True)
        losses.append(layer(x, label).value)
        layer.output.grad = np.ones((), losses[-1].dtype)
        layer.backward(lambda p: None)
        grads.append(x.grad)
    assert losses[0].dtype == grads[0].dtype == ml_dtypes.bfloat16
    assert float(losses[0]) == pytest.approx(float(losses[1]), rel=2**-7)
    scale = np.abs(grads[1]).max()
    np.testing.assert_allclose(grads[0].astype(np.float64), grads[1], atol=2**-7 * scale)


def test_a_bfloat16_fully_connected_output_does_not_depend_on_the_batch():
    """From 128 rows its product is split over the kernel threads, and the split was written
    into bfloat16 where the whole product is float32: the same example came out rounded to
    bfloat16 in a large batch and float32 in a small one (architecture.md: the activations
    after a product are float32)."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    layer = FullyConnected(1024, 512, dtype=bf16)
    x = np.random.default_rng(0).standard_normal((256, 1024)).astype(bf16)
    small, large = layer(Arg(x[:64])).value, layer(Arg(x)).value
    assert small.dtype == large.dtype == np.float32
    np.testing.assert_array_equal(small, large[:64])


def test_mse_of_many_bfloat16_elements_is_their_mean():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    pred = np.random.default_rng(1).standard_normal((3000, 4)).astype(ml_dtypes.bfloat16)
    target = np.zeros_like(pred)
    got = MSELoss()(Arg(pred), Arg(target)).value
    want = MSELoss()(Arg(pred.astype(np.float64)), Arg(target.astype(np.float64))).value
    assert got.dtype == ml_dtypes.bfloat16
    assert float(got) == pytest.approx(float(want), rel=2**-7)


def test_float16_mse_of_one_far_element_is_finite():
    """One float16 error of 300 squares to 90000, past float16's 65504: squared in float16 the
    loss was inf though its mean (5625) and every gradient are finite."""
    pred = np.zeros((4, 4), np.float16)
    target = pred.copy()
    target[1, 2] = 300
    got = MSELoss()(Arg(pred), Arg(target)).value
    want = MSELoss()(Arg(pred.astype(np.float64)), Arg(target.astype(np.float64))).value
    assert got.dtype == np.float16
    assert float(want) == 5625.0
    assert float(got) == float(np.float16(want))  # float64's, rounded to float16 (5624)


@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda: Conv2D(1, 2, 3, name="c"), (4, 1, 6, 6)),
        (lambda: ConvTranspose2D(1, 2, 3, name="c"), (4, 1, 6, 6)),
        (lambda: Conv3D(1, 2, 3, name="c"), (4, 1, 5, 5, 5)),
        (lambda: MaxPool2D(2, name="c"), (4, 1, 6, 6)),
        (lambda: AvgPool3D(2, name="c"), (4, 1, 4, 4, 4)),
        (lambda: Activation("relu", name="c"), (4, 1, 6, 6)),
    ],
)
def test_image_layers_fed_ids_say_to_cast_to_float(make, shape):
    """The Trainer feeds integer images (uint8 MNIST) as ids, with no values: convolutions and
    pooling failed with AttributeError: 'NoneType' object has no attribute 'ndim', an activation
    layer with a TypeError from the comparison in relu."""
    layer = make()
    ids = np.zeros(shape, np.uint8)
    with pytest.raises(LayerError, match=r"'c': expected float values, got uint8 ids .*cast"):
        layer(Arg(ids=ids))
    with pytest.raises(LayerError, match=r"'c': expected an input with values, got an Arg with"):
        layer(Arg())


@pytest.mark.parametrize(
    "make,said",
    [
        (
            lambda: MaxPool2D(0, name="p1"),
            r"^MaxPool2D 'p1': kernel_size must be >= 1, got \(0, 0\)",
        ),
        (lambda: MaxPool2D(2, stride=0, name="p1"), r"^MaxPool2D 'p1': stride must be >= 1"),
        (lambda: AvgPool2D(2, padding=-1), r"^AvgPool2D: padding must be >= 0"),
        (lambda: AvgPool3D((2, 2)), r"^AvgPool3D: kernel_size needs 3 values"),
        (lambda: MaxPool3D(2.5), r"^MaxPool3D: kernel_size must be an int or 3 ints"),
        (lambda: Conv2D(1, 1, 0, name="c1"), r"^Conv2D 'c1': kernel_size must be >= 1"),
    ],
)
def test_pooling_argument_errors_name_the_layer_as_convolutions_do(make, said):
    """MaxPool2D(0) said only numpy's 'kernel_size must be >= 1', not which layer."""
    with pytest.raises(LayerError, match=said):
        make()


def test_pooling_input_errors_name_the_layer():
    pool = MaxPool2D(2, name="p1")
    with pytest.raises(LayerError, match=r"^MaxPool2D 'p1': expected a 4-D input"):
        pool(Arg(np.zeros((2, 3), np.float32)))
    with pytest.raises(LayerError, match=r"^MaxPool2D 'p1': window \(2, 2\) is larger"):
        pool(Arg(np.zeros((1, 1, 1, 1), np.float32)))
