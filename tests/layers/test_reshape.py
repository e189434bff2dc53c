"""Reshape: the catalogue's flat rows (a Mixed of conv projections, FeatureMapExpand) into the
images pooling and convolution read, so Paddle's "conv projection, then pool" can be built."""

import re

import numpy as np
import pytest

from distconv import Arg, Network, Trainer
from distconv.checkpoint import CheckpointError, load_checkpoint
from distconv.gradient_check import check_layer_grad, check_network_grad
from distconv.init import set_seed
from distconv.layers import (
    Conv2D,
    ConvProjection,
    FeatureMapExpand,
    FullyConnected,
    LayerError,
    MaxPool2D,
    MaxPool3D,
    Mixed,
    Reshape,
    SoftmaxCrossEntropy,
)
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(60)

F64 = np.float64


@pytest.mark.parametrize(
    "given,shape",
    [((3, 48), (3, 4, 4)), ((2, 3, 4, 4), (48,)), ((2, 24), (2, 3, 2, 2)), ((2, 6, 4), (4, 6))],
)
def test_the_gradient_matches_finite_differences(rng, given, shape):
    """Rows to images, images to rows, rows to volumes, and one sample shape to another: the
    input's gradient against central differences, added (a second backward doubles it)."""
    x = Arg(rng.standard_normal(given), needs_grad=True)
    report = check_layer_grad(Reshape(*shape), [x])
    assert report.worst < 1e-6


def test_forward_is_the_reshape_and_backward_adds_into_the_gradient_there(rng):
    """Same values in C order, as a conv projection flattens them; the gradient reshaped back
    and added to what another reader of the input already put there."""
    v = rng.standard_normal((2, 12))
    x = Arg(v, needs_grad=True)
    layer = Reshape(3, 2, 2)
    y = layer(x)
    np.testing.assert_array_equal(y.value, v.reshape(2, 3, 2, 2))
    x.grad[...] = 1.0  # another reader's share
    y.grad = rng.standard_normal((2, 3, 2, 2))
    layer.backward(lambda p: None)
    np.testing.assert_array_equal(x.grad, 1.0 + y.grad.reshape(2, 12))


def test_the_input_gradient_is_a_buffer_of_its_own_not_a_view_of_the_output_gradient(rng):
    """Another reader of the input that adds its share after this backward (a network walks
    the layers in reverse) must not write into this layer's output gradient: handed the output
    gradient as the input's (add_grad), the two were one buffer."""
    x = Arg(rng.standard_normal((2, 12)), needs_grad=True)
    layer = Reshape(3, 4)
    y = layer(x)
    y.grad = rng.standard_normal((2, 3, 4))
    layer.backward(lambda p: None)
    assert not np.shares_memory(x.grad, y.grad)


def test_a_shape_of_another_size_is_refused_naming_the_layer_and_both_sizes():
    with pytest.raises(
        LayerError,
        match=re.escape(
            "Reshape 'r': shape (4, 8, 8) holds 256 features per sample, but the input has "
            "192 (input shape (2, 192))"
        ),
    ):
        Reshape(4, 8, 8, name="r")(Arg(np.zeros((2, 192), np.float32)))


def test_a_shape_given_with_the_batch_axis_is_told_one_samples():
    """PyTorch's x.view(N, C, H, W) names the batch; here the shape is one sample's."""
    with pytest.raises(
        LayerError,
        match=r"; shape is one sample's, the batch axis kept: "
        r"Reshape\(4, 8, 8\)$",
    ):
        Reshape(2, 4, 8, 8, name="r")(Arg(np.zeros((2, 256), np.float32)))


def test_one_tuple_is_the_shape_as_numpy_takes_it():
    assert Reshape((4, 8, 8)).shape == Reshape(4, 8, 8).shape == (4, 8, 8)


@pytest.mark.parametrize(
    "shape,said",
    [
        ((), r"needs the shape of one sample, e\.g\. Reshape\(C, H, W\)"),
        ((4, 0), r"shape\[1\]=0 must be >= 1"),
        ((4, 2.5), r"shape\[1\]=2\.5 must be an int"),
        ((-1, 4, 4), r"shape\[0\]=-1: no size is inferred; .*\(Reshape\(C, H, W\), not "),
    ],
)
def test_a_shape_that_is_no_shape_is_refused_when_built(shape, said):
    with pytest.raises(LayerError, match=r"^Reshape: " + said):
        Reshape(*shape)


@pytest.mark.parametrize(
    "layer,rows,said",
    [
        (MaxPool2D(2), (2, 256), r"MaxPool2D 'p': .* got \(2, 256\); .*Reshape\(C, H, W\)\)$"),
        (Conv2D(3, 2, 3), (2, 192), r"Conv2D 'p': .* got shape \(2, 192\); .*Reshape\(C, H, W\)"),
        (MaxPool3D(2), (2, 256), r"\(N, C, D, H, W\) first \(Reshape\(C, D, H, W\)\)$"),
    ],
)
def test_a_pool_or_conv_fed_flat_rows_names_reshape(layer, rows, said):
    """The refusal of a 2-D input says what it is and the way to images; it named the shape
    alone, and nothing in the catalogue reshaped rows."""
    net = Network()
    net.add("e", FeatureMapExpand(rows[1] // 64), "img")
    net.add("p", layer, "e")
    with pytest.raises(LayerError, match=said) as refused:
        net.forward({"img": np.zeros((rows[0], 64), np.float32)})
    assert (
        "; 2-D input is flattened rows (a feed of flat images, a Mixed or FeatureMapExpand "
        "output): reshape it to (N, C" in str(refused.value)
    )


def conv_then_pool(dtype=np.float32, shape=(4, 8, 8)) -> Network:
    """Paddle's "conv projection, then pool": 8x8 one-channel rows, a Mixed of a conv
    projection (4 channels, shared bias, relu), reshaped to images, pooled, classified."""
    set_seed(0)
    net = Network()
    conv = ConvProjection(1, 4, 3, padding=1, input_size=8, dtype=dtype)
    net.add("m", Mixed([conv], bias=True, shared_bias=True, act="relu", dtype=dtype), "img")
    net.add("r", Reshape(*shape), "m")
    net.add("p", MaxPool2D(2), "r")
    net.add("fc", FullyConnected(64, 2, dtype=dtype), "p")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    return net


def test_a_conv_projection_reshaped_and_pooled_passes_the_network_check(rng):
    net = conv_then_pool(F64)
    feeds = {
        "img": Arg(rng.standard_normal((3, 64)), needs_grad=False),
        "label": Arg(ids=np.array([0, 1, 1])),
    }
    report = check_network_grad(net, feeds, inputs=True)
    names = [f"param {p.name}" for p in net.parameters()] + ["input img"]
    assert sorted(report.diffs) == sorted(names) and report.worst < 1e-6


def _data(n=256):
    """Which half of the image is brighter: learnable through conv, relu, pool and FC."""
    rng = np.random.default_rng(1)
    img = rng.standard_normal((n, 64)).astype(np.float32)
    label = (img[:, :32].sum(axis=1) > img[:, 32:].sum(axis=1)).astype(np.int64)
    return {"img": img, "label": label}


def _trainer(net: Network, out) -> Trainer:
    sync = LocalSync(create_optimizer("adam", lr=0.01))
    return Trainer(net, sync, 32, out_dir=out, progress=False)


def test_it_trains_and_its_checkpoint_names_the_shape(tmp_path):
    """The loss falls; the checkpoint's layer facts record the shape, so a resume of a model
    reshaped otherwise (the same parameters) is refused naming it."""
    trainer = _trainer(conv_then_pool(), tmp_path)
    records = trainer.fit(_data(), epochs=4)
    assert records[-1]["train_loss"] < 0.6 * records[0]["train_loss"], records
    extra = load_checkpoint(trainer.checkpoints.run.latest().part("chief")).extra
    assert extra["layers"]["r"]["shape"] == [4, 8, 8]
    other = _trainer(conv_then_pool(shape=(4, 4, 16)), tmp_path)
    with pytest.raises(CheckpointError, match=r"layers\.r\.shape: checkpoint \[4, 8, 8\]"):
        other.fit(_data(), epochs=5, resume=True)


@pytest.mark.gpu
def test_on_the_device_it_runs_the_same_code_as_on_the_host(cupy, rng):
    """cupy arrays through the same reshape: a device output, and the gradient added back on
    the device (skipped where cupy or a CUDA device is missing)."""
    v = rng.standard_normal((2, 48))
    x = Arg(cupy.asarray(v), needs_grad=True)
    layer = Reshape(3, 4, 4)
    y = layer(x)
    assert isinstance(y.value, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(y.value), v.reshape(2, 3, 4, 4))
    g = rng.standard_normal((2, 3, 4, 4))
    y.grad = cupy.asarray(g)
    layer.backward(lambda p: None)
    assert isinstance(x.grad, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(x.grad), g.reshape(2, 48))


@pytest.mark.parametrize(
    "layer,given,said",
    [
        (
            Conv2D(1, 2, 3),
            (2, 8, 8),
            "; images with no channel axis? Reshape(1, 8, 8) gives them one",
        ),
        (
            MaxPool3D(2),
            (2, 4, 4, 4),
            "; images with no channel axis? Reshape(1, 4, 4, 4) gives them one",
        ),
        (MaxPool2D(2), (2, 1, 2, 4, 4), "got (2, 1, 2, 4, 4)"),
    ],
)
def test_images_with_no_channel_axis_are_told_reshape_and_volumes_are_not(layer, given, said):
    """MNIST fed as (N, 28, 28) lacks the channel axis, which Reshape(1, 28, 28) adds; a 2-D
    layer fed volumes is the wrong layer, which no reshape mends, and is told none."""
    with pytest.raises(LayerError) as refused:
        layer(Arg(np.zeros(given, np.float32)))
    assert str(refused.value).endswith(said)
