"""Edge inputs a researcher may hand a layer directly: integer values, an empty batch, ids of the
wrong shape, inputs of different batch sizes."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg, Network, Parameter
from distconv.layers import (
    Activation,
    AvgPool2D,
    Concatenate,
    ContextProjection,
    Conv2D,
    ConvProjection,
    ConvTranspose2D,
    DotMulProjection,
    FeatureMapExpand,
    FullMatrixProjection,
    FullyConnected,
    IdentityProjection,
    MaxPool3D,
    Mixed,
    Multiplex,
    SelectiveFullyConnected,
    SequenceConcat,
    SliceProjection,
    SoftmaxCrossEntropy,
    TableProjection,
)
from distconv.layers.base import LayerError
from distconv.network import NetworkError

F64 = np.float64


@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda: AvgPool2D(2, name="c"), (1, 1, 4, 4)),
        (lambda: MaxPool3D(2, name="c"), (1, 1, 2, 2, 2)),
        (lambda: Activation("sigmoid", name="c"), (2, 3)),
        (lambda: Conv2D(1, 2, 3, name="c"), (1, 1, 4, 4)),
    ],
)
def test_integer_values_are_refused_naming_the_layer(make, shape):
    """An AvgPool2D fed integer values returned zeros (1/4 cast to int64 is 0), a sigmoid
    truncated its output to 0, a convolution failed with numpy's UFuncTypeError."""
    x = np.arange(np.prod(shape)).reshape(shape) + 1
    with pytest.raises(LayerError, match=r"'c': expected float values, got int64 values"):
        make()(Arg(x))


@pytest.mark.parametrize(
    "make, inputs",
    [
        (lambda: Concatenate(act="sigmoid", name="c"), lambda x: [Arg(x), Arg(x)]),
        (lambda: FeatureMapExpand(2, act="sigmoid", name="c"), lambda x: [Arg(x)]),
        (lambda: Multiplex(act="sigmoid", name="c"), lambda x: [Arg(ids=np.zeros(2, int)), Arg(x)]),
        (
            lambda: SequenceConcat(act="sigmoid", name="c"),
            lambda x: [Arg(x, seq_starts=np.array([0, 2]))] * 2,
        ),
    ],
)
def test_integer_rows_into_a_layer_that_copies_them_are_refused_naming_it(make, inputs):
    """Layers that copy their inputs' rows computed in the rows' integer type: a sigmoid
    truncated every output to 0 with no error, and backward failed with numpy's
    UFuncTypeError, adding float gradients into integer ones, naming no layer."""
    x = np.array([[0, 1, -2], [3, 0, 1]])
    with pytest.raises(LayerError, match=r"'c': expected float values, got int64 values"):
        make()(*inputs(x))
    layer = make()
    out = layer(*inputs(x.astype(F64)))  # their float cast passes, forward and backward
    assert out.value.dtype == F64 and out.value.min() > 0
    out.grad = np.ones_like(out.value)
    layer.backward(lambda p: None)


@pytest.mark.parametrize(
    "make, part",
    [
        (lambda: Mixed([FullMatrixProjection(4, 2)], name="c"), "FullMatrixProjection 'proj0'"),
        (lambda: Mixed([IdentityProjection(4)], name="c"), "IdentityProjection 'proj0'"),
        (lambda: Mixed([DotMulProjection(4)], name="c"), "DotMulProjection 'proj0'"),
        (lambda: Mixed([ConvProjection(1, 2, 1, input_size=(2, 2))], name="c"), "ConvProjection"),
    ],
)
def test_integer_values_into_a_projection_are_refused_naming_the_layer(make, part):
    """A projection fed integer values (an Arg needs a gradient by default) computed a float
    output, then its backward added float gradients into the input's integer one: numpy's
    UFuncTypeError, naming no layer (a ConvProjection failed so in forward, writing a float
    product into an integer output). FullyConnected refused them already."""
    x = Arg(np.arange(8).reshape(2, 4))
    with pytest.raises(LayerError, match=rf"'c': {part}.*: expected float values in the input, "):
        make()(x)


def _mask_layers():
    """(name, layer maker, inputs maker): parts that read an integer mask needing no gradient."""
    from distconv.layers.operator import DotMulOperator

    return [
        ("DotMulOperator", lambda: Mixed([None, None], [DotMulOperator()], size=4), 2),
        ("DotMulProjection", lambda: Mixed([DotMulProjection(4)]), 1),
        ("FullMatrixProjection", lambda: Mixed([FullMatrixProjection(4, 3)]), 1),
        ("IdentityProjection", lambda: Mixed([IdentityProjection(4)]), 1),
    ]


@pytest.mark.parametrize("name, make, inputs", _mask_layers())
def test_an_integer_mask_that_needs_no_gradient_still_reads_as_its_float_cast(name, make, inputs):
    """Refusing integer values in every part (for the backward's UFuncTypeError, which only
    an input that needs a gradient meets) refused what worked before: an integer 0/1 mask
    passed with needs_grad=False, as a Network passes an array feed. It gives what the mask
    cast to float gives, forward and backward."""
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    mask = np.array([[1, 0, 1, 1], [0, 1, 1, 0]])
    layer, results = make(), []
    for m in (mask, mask.astype(np.float32)):
        args = [Arg(x.copy()), Arg(m, needs_grad=False)][-inputs:]
        out = layer(*args)
        out.grad = np.ones_like(out.value)
        layer.backward(lambda p: None)
        grads = [a.grad for a in args if a.needs_grad] + [p.grad.copy() for p in layer.parameters()]
        for p in layer.parameters():
            p.grad[...] = 0
        results.append((out.value, grads))
    # float32 sums: the integer mask is multiplied in float64, one rounding apart (1 in 75
    # runs of a random weight failed rtol alone, where the output sums to near 0)
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6, atol=1e-6)
    assert results[0][0].dtype == np.float32
    for got, want in zip(results[0][1], results[1][1], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Mixed([ConvProjection(1, 2, 1, input_size=(2, 2))], name="c"),
        lambda: Mixed([ContextProjection(4, 3, trainable_padding=True)], name="c"),
    ],
)
def test_parts_that_compute_in_the_input_dtype_refuse_integers_needing_no_gradient(make):
    """A convolution's columns and a context window's learnt padding take the input's dtype:
    integer values are refused there with or without a gradient."""
    x = Arg(np.arange(8).reshape(2, 4), seq_starts=np.array([0, 2]), needs_grad=False)
    with pytest.raises(LayerError, match=r"'c': .*: expected float values in the input, "):
        make()(x)


def test_a_context_window_without_learnt_padding_reads_an_integer_input_as_its_float_cast():
    """Only learnt padding is cast to the input's dtype: with zeros outside the sequences an
    integer input that needs no gradient gives what its float cast gives, as before 8bbf8ca
    (a6ce776 refused it with the learnt padding's reason)."""
    x = np.arange(8).reshape(4, 2)
    starts = np.array([0, 3, 4])
    outs = [
        Mixed([ContextProjection(2, 3)], bias=False)(Arg(v, seq_starts=starts, needs_grad=False))
        for v in (x, x.astype(np.float32))
    ]
    np.testing.assert_array_equal(outs[0].value, outs[1].value)
    assert outs[0].value.dtype == np.float32


def test_a_conv_operator_refuses_integer_images_needing_no_gradient():
    """Its columns take the images' dtype: integer images (with float filters) truncated the
    filters to integers, with no error, had ConvOperator taken integer values as the other
    operators do (no test held it to ``takes_integer_values = False``)."""
    from distconv.layers.operator import ConvOperator

    images = Arg(np.arange(18).reshape(2, 9), needs_grad=False)
    filters = Arg(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
    layer = Mixed([None, None], [ConvOperator(1, 1, 2, input_size=(3, 3))], size=4, name="c")
    with pytest.raises(LayerError, match=r"'c': .*: expected float values in the image "):
        layer(images, filters)


def test_integer_values_into_a_mixed_network_name_the_feed():
    """In a Network the refusal names the feed, as for a convolution's integer images."""
    net = Network()
    net.add("mix", Mixed([FullMatrixProjection(4, 2)]), "x")
    with pytest.raises(NetworkError, match=r"Mixed 'mix': input 'x' holds int64"):
        net.forward({"x": Arg(np.ones((2, 4), np.int64))})


def test_integer_images_into_an_average_pooling_network_name_the_feed():
    """In a Network an int image read first by an AvgPool2D trained on zeros, with no error."""
    net = Network()
    net.add("pool", AvgPool2D(2), "image")
    net.add("fc", FullyConnected(4, 2), "pool")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    feeds = {"image": np.ones((2, 1, 4, 4), np.int64), "label": Arg(ids=np.array([0, 1]))}
    with pytest.raises(NetworkError, match=r"AvgPool2D 'pool': input 'image' holds int64"):
        net.forward(feeds)


def _forward_backward(layer, *inputs):
    out = layer(*inputs)
    dy = np.arange(out.value.size, dtype=out.value.dtype).reshape(out.value.shape) + 1
    out.grad = dy
    layer.backward(lambda p: None)
    return out.value, dy


@pytest.mark.parametrize("as_row_vector", [True, False])
def test_feature_map_expand_on_an_empty_batch(rng, as_row_vector):
    """The backward's reshape to (N, f, -1) failed on N = 0."""
    layer = FeatureMapExpand(3, as_row_vector=as_row_vector)
    x = Arg(np.zeros((0, 4)))
    y, _ = _forward_backward(layer, x)
    assert y.shape == (0, 12) and x.grad.shape == (0, 4)
    # and the same code on a batch: each input element's gradient sums its 3 copies
    x = Arg(rng.standard_normal((2, 4)))
    y, dy = _forward_backward(layer, x)
    copies = dy.reshape(2, 3, 4).sum(1) if as_row_vector else dy.reshape(2, 4, 3).sum(2)
    np.testing.assert_array_equal(x.grad, copies)


def test_context_projection_on_an_empty_batch(rng):
    """The forward's reshape to (N, -1) failed on N = 0."""
    layer = Mixed([ContextProjection(3, 3, dtype=F64)], dtype=F64)
    x = Arg(np.zeros((0, 3)), seq_starts=np.array([0]))
    y, _ = _forward_backward(layer, x)
    assert y.shape == (0, 9) and x.grad.shape == (0, 3)
    x = Arg(rng.standard_normal((3, 3)), seq_starts=np.array([0, 3]))
    y, _ = _forward_backward(layer, x)
    v = x.value
    np.testing.assert_array_equal(y[1], np.concatenate([v[0], v[1], v[2]]))
    np.testing.assert_array_equal(y[0], np.concatenate([np.zeros(3), v[0], v[1]]))


def test_shared_bias_of_conv_projections_on_an_empty_batch(rng):
    """The shared bias's reshape to (N, channels, -1) failed on N = 0."""
    layer = Mixed([ConvProjection(2, 3, 3, input_size=4, dtype=F64)], bias=True, shared_bias=True)
    layer.bias.value[...] = [1.0, 2.0, 3.0]
    x = Arg(np.zeros((0, 32)))
    y, _ = _forward_backward(layer, x)
    assert y.shape == (0, 12) and x.grad.shape == (0, 32)
    np.testing.assert_array_equal(layer.bias.grad, [0, 0, 0])
    y, dy = _forward_backward(layer, Arg(np.zeros((2, 32))))  # zero images: y is the bias
    np.testing.assert_array_equal(y.reshape(2, 3, 4), np.broadcast_to([[1], [2], [3]], (2, 3, 4)))
    np.testing.assert_array_equal(layer.bias.grad, dy.reshape(2, 3, 4).sum(axis=(0, 2)))


def test_table_ids_must_be_one_per_row():
    """ids of shape (N, 2) gave 2N rows for an N-row output: numpy's broadcast error."""
    layer = Mixed([TableProjection(5, 3)], name="emb")
    with pytest.raises(LayerError, match=r"'emb': TableProjection 'proj0': needs one id per row"):
        layer(Arg(ids=np.array([[0, 1], [2, 3]])))


@pytest.mark.parametrize("cls", [FullyConnected, SelectiveFullyConnected])
def test_fully_connected_inputs_must_agree_on_rows(cls):
    """Inputs of 2 and 3 rows failed with numpy's broadcast error, naming no layer."""
    layer = cls([4, 2], 3, name="fc")
    a, b = Arg(np.zeros((2, 4), np.float32)), Arg(np.zeros((3, 2), np.float32))
    with pytest.raises(LayerError, match=r"'fc': inputs have different numbers of rows: \[2, 3\]"):
        layer(a, b)
    if cls is SelectiveFullyConnected:
        with pytest.raises(LayerError, match=r"different numbers of rows: \[2, 3\]"):
            layer(a, b, Arg(ids=np.zeros((2, 1), np.int64)))


def test_a_transposed_convolution_cropped_to_nothing_blames_the_padding():
    """It said "kernel (1, 3) (dilation (3, 1)) is larger than the input (1, 3) padded by
    (1, 0)": a transposed convolution's output grows with the kernel; its padding crops."""
    layer = ConvTranspose2D(1, 1, (1, 3), padding=(1, 0), dilation=(3, 1), name="up")
    with pytest.raises(LayerError, match=r"'up': padding \(1, 0\) crops away the whole output"):
        layer(Arg(np.zeros((1, 1, 1, 3), np.float32)))
    with pytest.raises(LayerError, match=r"Conv2D: kernel \(3, 3\) .* is larger"):
        Conv2D(1, 1, 3)(Arg(np.zeros((1, 1, 2, 2), np.float32)))


@pytest.mark.parametrize("stride", [1, 2])
def test_a_transposed_convolution_of_an_empty_input_blames_no_padding(stride):
    """A spatial axis of 0: with stride 1 the message blamed 'padding (0, 0)', which crops
    nothing; with stride 2 a row of bias came out of no input at all."""
    from distconv.layers import ConvTranspose2D

    up = ConvTranspose2D(1, 1, 3, stride=stride, name="up")
    with pytest.raises(LayerError, match=r"'up': a transposed convolution of an empty input"):
        up.forward(Arg(np.zeros((1, 1, 0, 3), np.float32)))


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: Conv2D(3, 4, True), r"kernel_size must be an int or 2 ints, got True"),
        (lambda: Conv2D(3, 4, (3, False)), r"kernel_size must be an int or 2 ints"),
        (lambda: Conv2D(3, 4.0, 3), r"out_channels must be an int, got 4.0"),
        (lambda: Conv2D(4, 4, 3, groups=2.0), r"groups must be an int, got 2.0"),
        (lambda: Conv2D(3, 4, 3, stride=True), r"stride must be an int or 2 ints, got True"),
        (lambda: FullyConnected(4.5, 3), r"in_features=4.5, out_features=3 must be ints >= 1"),
        (lambda: FullyConnected([4, 2.0], 3), r"in_features=\[4, 2.0\], out_features=3 must"),
        (lambda: FullyConnected(4, True), r"in_features=4, out_features=True must be ints"),
        (lambda: FullyConnected([], 3), r"in_features=\[\], out_features=3 must be ints >= 1"),
    ],
)
def test_sizes_that_are_not_ints_are_refused(make, said):
    """A bool is an int to Python, so True built a 1x1 convolution; a float channel count was
    taken; FullyConnected(4.5, 3) raised 'float' object is not iterable."""
    with pytest.raises(ValueError, match=said):
        make()


def test_numpy_ints_are_sizes_too():
    conv = Conv2D(np.int64(3), np.int32(4), np.int64(3), groups=np.int64(1))
    fc = FullyConnected(np.int64(4), np.int64(3))
    assert conv.weight.shape == (4, 3, 3, 3) and fc.weight.shape == (3, 4)


def test_a_softmax_of_no_rows_names_the_layer():
    """numpy's AxisError from inside the kernel before."""
    with pytest.raises(LayerError, match=r"Activation: softmax is over axis 1 .* got \(4,\)"):
        Activation("softmax")(Arg(np.zeros(4)))
    rows = Activation("softmax")(Arg(np.zeros((2, 4)))).value
    assert np.allclose(rows, 0.25)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # said quietly, as PyTorch does
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_a_softmax_of_a_row_of_minus_inf_is_nan_not_zeros(dtype):
    """A row that is -inf throughout has no softmax (float16 logits below -65504 are such a
    row): it came out as zeros, probabilities that sum to 0 read as an answer; PyTorch gives
    NaN. Other rows, a -inf entry among them, are computed as before, and backward passes the
    NaN on to that row's gradient alone."""
    z = np.array([[-np.inf, -np.inf, -np.inf], [0.0, np.log(3.0), -np.inf]], dtype=dtype)
    layer = Activation("softmax")
    y = layer(Arg(z)).value
    assert y.dtype == dtype and np.isnan(y[0]).all()
    np.testing.assert_allclose(y[1], [0.25, 0.75, 0], rtol=1e-3)
    layer.output.grad = np.ones_like(y)
    layer.backward(lambda p: None)
    dz = layer.inputs[0].grad
    assert np.isnan(dz[0]).all() and np.isfinite(dz[1]).all()
    images = np.full((1, 2, 2, 2), -np.inf, dtype=dtype)  # over the channels of an image
    images[0, 1, 0, 0] = 0
    y = Activation("softmax")(Arg(images)).value
    assert y[0, 1, 0, 0] == 1 and y[0, 0, 0, 0] == 0 and np.isnan(y[0, :, 1]).all()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: Mixed([FullMatrixProjection(True, 3)]), r"in_width=True must be an int"),
        (lambda: Mixed([FullMatrixProjection(4.0, 3)]), r"in_width=4.0 must be an int"),
        (lambda: Mixed([FullMatrixProjection(4, True)]), r"out_width=True must be an int"),
        (lambda: Mixed([DotMulProjection(True)]), r"in_width=True must be an int"),
        (lambda: Mixed([TableProjection(4.0, 3)]), r"vocab_size=4.0 must be an int"),
        (lambda: Mixed([SliceProjection(4, [(0, 2.5)])]), r"slices must be \(start, end\)"),
        (lambda: Mixed([IdentityProjection(4, offset=True)]), r"slices must be \(start, end\)"),
        (lambda: Mixed([ContextProjection(4, True)]), r"context_length=True must be an int"),
        (lambda: Mixed([ContextProjection(4, 3, 0.5)]), r"context_start=0.5 must be an int"),
        (lambda: Mixed([FullMatrixProjection(4, 3)], size=True), r"size=True must be an int"),
        (lambda: FeatureMapExpand(True), r"num_filters=True must be an int >= 1"),
        (lambda: SequenceConcat(True), r"SequenceConcat: width=True must be an int"),
    ],
)
def test_the_other_layers_refuse_sizes_that_are_not_ints(make, said):
    """The projections, Mixed, FeatureMapExpand and SequenceConcat took True as 1 (a 1-filter
    expansion, a context of one row) or raised numpy's unnamed TypeError for a float width,
    after Conv and FullyConnected learnt to refuse them."""
    with pytest.raises(ValueError, match=said):
        make()


def test_the_other_layers_take_numpy_ints_and_arrays_of_widths():
    """A numpy int is a size everywhere, kept as Python's (the start-up check compares layer
    settings of plain values only); FullyConnected takes its widths as an array, as before
    a181432."""
    fc = FullyConnected(np.array([3, 4]), 2)
    assert fc.in_widths == (3, 4) and fc.weights[1].shape == (2, 4)
    mixed = Mixed(
        [FullMatrixProjection(np.int64(3), np.int64(2)), ContextProjection(np.int64(2), 1)],
        size=np.int64(2),
    )
    projections = mixed.settings()["projections"]
    assert projections[0]["in_width"] == 3 and type(projections[0]["in_width"]) is int
    assert Mixed([TableProjection(np.int64(5), 2)]).projections[0].vocab_size == 5
    assert FeatureMapExpand(np.int64(2)).num_filters == 2
    assert SequenceConcat(np.int64(3)).width == 3


@pytest.mark.parametrize(
    "make, weight",
    [
        (lambda w: Conv2D(2, 3, 1, weight=w, name="c"), np.zeros((3, 2, 1, 1))),
        (lambda w: FullyConnected(2, 3, weight=w, name="c"), np.zeros((3, 2))),
        (lambda w: FullyConnected(2, 3, weight=w, name="c"), [Parameter("w", np.zeros((3, 2)))]),
        (lambda w: Mixed([FullMatrixProjection(2, 3, weight=w)], name="c"), np.zeros((3, 2))),
        (lambda w: Mixed([TableProjection(3, 2, weight=w)], name="c"), np.zeros((3, 2))),
    ],
)
def test_sharing_an_array_instead_of_a_parameter_is_refused_when_built(make, weight):
    """``weight=`` given the array (``net["fc"].weight.value``, as a PyTorch user passes a
    tensor), or a one-entry list to a single-input FC: the shape matched, so the layer was
    built with an array among its parameters and failed in its first forward with an
    AttributeError ('numpy.ndarray' object has no attribute 'value'), naming no layer."""
    with pytest.raises(LayerError, match=r"shared weight must be a Parameter, got (ndarray|list)"):
        make(weight)


@pytest.mark.parametrize(
    "make, key",
    [
        (lambda: Conv2D(2, 3, 3, dtype=np.int32, name="c"), "weight"),
        (lambda: FullyConnected(2, 3, dtype=np.int64, name="c"), "weight"),
        (lambda: Mixed([FullMatrixProjection(2, 3, dtype=np.int32)], name="c"), "proj0.weight"),
        (lambda: SequenceConcat(3, bias=True, dtype="int8", name="c"), "bias"),
    ],
)
def test_integer_parameter_dtypes_are_refused_when_built(make, key):
    """dtype=np.int32 drew the weights as integers (MSRA's draws truncate to mostly 0), and the
    first backward failed with numpy's UFuncTypeError adding float gradients into them."""
    with pytest.raises(LayerError, match=rf"'c': {key}: dtype=int\d+ is not a float type"):
        make()


def test_ids_given_as_a_list_read_as_the_array_they_stand_for(rng):
    """``Arg(ids=[0, 2])`` raised a bare AttributeError (``.reshape``, ``.dtype``) in the loss
    and in a table projection; Multiplex and SelectiveFC already took lists."""
    logits = rng.standard_normal((2, 3))
    by_list = SoftmaxCrossEntropy()(Arg(logits), Arg(ids=[0, 2]))
    by_array = SoftmaxCrossEntropy()(Arg(logits), Arg(ids=np.array([0, 2])))
    assert by_list.value == by_array.value
    table = Mixed([TableProjection(5, 3, dtype=F64)], bias=False, name="emb")
    rows = table(Arg(ids=[4, 1])).value
    np.testing.assert_array_equal(rows, table.projections[0].weight.value[[4, 1]])
    assert Arg(ids=[]).ids.dtype == np.int64  # an empty batch's ids are ids, not floats
    # a number is no batch of ids: the layer names it, not len() in Arg ("int has no len()")
    with pytest.raises(LayerError, match="emb.*0-d ids"):
        table(Arg(ids=3))


def test_an_unknown_activation_names_the_layer():
    with pytest.raises(LayerError, match=r"Conv2D 'c1': unknown activation 'gelu'; choose one"):
        Conv2D(1, 2, 3, act="gelu", name="c1")


@pytest.mark.parametrize("scale", ["a", None])
def test_a_scale_that_is_no_number_names_the_operator(scale):
    from distconv.layers.operator import DotMulOperator

    with pytest.raises(LayerError, match=r"DotMulOperator: scale must be a number, got "):
        DotMulOperator(scale)


@pytest.mark.parametrize("indices", [(0, 1.9), (True, 0), "01", [0, "1"], 1])
def test_operator_input_indices_that_are_not_ints_name_the_operator(indices):
    """int() read (0, 1.9) as (0, 1), (True, 0) as (1, 0) and "01" as (0, 1): the operator
    silently multiplied other inputs than the ones meant."""
    from distconv.layers.operator import DotMulOperator

    with pytest.raises(LayerError, match=r"DotMulOperator: needs 2 non-negative input indices"):
        DotMulOperator(1.0, indices)
    assert DotMulOperator(1.0, np.array([1, 0])).input_indices == (1, 0)  # numpy ints are ints


@pytest.mark.parametrize(
    "make",
    [
        lambda w: FullyConnected(2, 2, weight=w, name="c"),
        lambda w: Mixed([FullMatrixProjection(2, 2, weight=w)], name="c"),
        lambda w: Mixed([TableProjection(2, 2, weight=w)], name="c"),
    ],
)
def test_a_shared_integer_parameter_is_refused_when_built(make):
    """``Parameter("w", np.array([[1, 0], [0, 1]]))`` holds int64: a layer took it, computed
    its forward in float64 and failed in backward with numpy's casting error, naming nothing."""
    with pytest.raises(LayerError, match=r"shared weight: parameter 'w' has dtype int64"):
        make(Parameter("w", np.array([[1, 0], [0, 1]])))
    make(Parameter("w", np.array([[1, 0], [0, 1]]), static=True))  # a frozen one trains nothing
