"""Mixed, Concatenate and Concatenate2: combinations, bias, the backward order, names, errors."""

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.layers.base import LayerError
from distconv.layers.concat import Concatenate, Concatenate2
from distconv.layers.context import ContextProjection
from distconv.layers.conv import ConvProjection, ConvTransposeProjection
from distconv.layers.mixed import Mixed
from distconv.layers.operator import ConvOperator, DotMulOperator
from distconv.layers.projection import (
    DotMulProjection,
    FullMatrixProjection,
    IdentityProjection,
    ScalingProjection,
    SliceProjection,
    TableProjection,
)
from distconv.network import Network

F64 = np.float64
SEQ_STARTS = np.array([0, 3, 4, 4, 9])


def randomize(layer, rng):
    for p in layer.parameters():
        p.value[...] = rng.standard_normal(p.shape)
    return layer


def rows(rng, width, n=9):
    return Arg(rng.standard_normal((n, width)), seq_starts=SEQ_STARTS if n == 9 else None)


def forward_backward(layer, inputs, dout, callback=lambda p: None):
    y = layer(*inputs).value.copy()
    layer.output.grad = dout
    layer.backward(callback)
    return y


# -- Mixed ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("act", [None, "sigmoid"])
def test_mixed_sums_several_projections(rng, bias, act):
    projections = [
        FullMatrixProjection(5, 6, dtype=F64),
        TableProjection(4, 6, dtype=F64),
        ContextProjection(2, 3, -1, trainable_padding=True, dtype=F64),
        IdentityProjection(8, 6, offset=1),
        DotMulProjection(6, dtype=F64),
    ]
    layer = randomize(Mixed(projections, bias=bias, act=act, dtype=F64), rng)
    ids = Arg(ids=np.array([0, 3, 3, 1, 2, 0, 1, 1, 3]), seq_starts=SEQ_STARTS)
    inputs = [rows(rng, 5), ids, rows(rng, 2), rows(rng, 8), rows(rng, 6)]
    report = check_layer_grad(layer, inputs, elements=4)
    assert len(report.diffs) == 4 + 4 + bias  # 4 inputs with values, 4 weights, the bias
    assert layer.output.seq_starts is SEQ_STARTS


def test_mixed_output_is_the_sum_of_its_parts(rng):
    full, scaling = FullMatrixProjection(4, 3, dtype=F64), ScalingProjection(3, dtype=F64)
    # input 2 has no projection: only the operator reads it
    layer = Mixed([full, scaling, None], [DotMulOperator(0.5, (1, 2))], bias=True, dtype=F64)
    randomize(layer, rng)
    a, b, c = rows(rng, 4), rows(rng, 3), rows(rng, 3)
    want = (
        a.value @ full.weight.value.T
        + scaling.weight.value * b.value
        + 0.5 * b.value * c.value
        + layer.bias.value
    )
    np.testing.assert_allclose(layer(a, b, c).value, want, rtol=1e-12)
    check_layer_grad(layer, [a, b, c])


def test_mixed_output_in_bfloat16_is_what_float64_makes_of_the_same_numbers(rng):
    """A bfloat16 Mixed took its output type from its constructor's default (float32): only
    dtypes of numpy kind "f" counted as floats, and ml_dtypes' are kind "V"."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    full, scaling = FullMatrixProjection(4, 3, dtype=F64), ScalingProjection(3, dtype=F64)
    layer = randomize(Mixed([full, scaling, None], [DotMulOperator(0.5, (1, 2))], bias=True), rng)
    a, b, c = rows(rng, 4), rows(rng, 3), rows(rng, 3)
    for arg in (a, b, c):
        arg.value = arg.value.astype(bf16)
    for p in layer.parameters():
        p.cast(bf16)
    # float64 on the very numbers bfloat16 holds: the weights promote to float64 there
    want = layer(*[Arg(x.value.astype(F64)) for x in (a, b, c)]).value
    got = layer(a, b, c).value
    assert got.dtype == bf16
    np.testing.assert_allclose(got.astype(F64), want, rtol=2**-6, atol=2**-6 * np.abs(want).max())


def test_a_bfloat16_softmax_over_many_columns_sums_to_one(rng):
    """act="softmax" summed bfloat16 in bfloat16: over 4096 columns the rows summed to 2.4 and
    the gradient was off by more than itself, where float64 on the same numbers sums to 1."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    layer = Mixed([IdentityProjection(4096)], act="softmax", dtype=bf16)
    x = Arg(rng.standard_normal((3, 4096)).astype(bf16))
    y = layer(x).value
    assert y.dtype == bf16
    np.testing.assert_allclose(y.astype(F64).sum(axis=1), 1, rtol=2**-7)
    dy = rng.standard_normal(y.shape).astype(bf16)
    layer.output.grad = dy
    layer.backward(lambda p: None)
    exact = Mixed([IdentityProjection(4096)], act="softmax", dtype=F64)
    exact(Arg(x.value.astype(F64)))  # float64 on the very numbers bfloat16 holds
    exact.output.grad = dy.astype(F64)
    exact.backward(lambda p: None)
    want = exact.inputs[0].grad
    np.testing.assert_allclose(x.grad.astype(F64), want, atol=2**-6 * np.abs(want).max())


def test_mixed_projection_and_operator_on_the_same_input(rng):
    layer = Mixed([FullMatrixProjection(4, 4, dtype=F64)], [DotMulOperator(1.0, (0, 0))])
    randomize(layer, rng)
    check_layer_grad(layer, [rows(rng, 4)])


@pytest.mark.parametrize("shared_bias", [False, True])
def test_mixed_convolutions_with_bias(rng, shared_bias):
    conv = ConvProjection(2, 4, 3, input_size=(5, 5), padding=1, dtype=F64)
    deconv = ConvTransposeProjection(3, 4, 3, input_size=(3, 3), stride=2, padding=1, dtype=F64)
    op = ConvOperator(2, 4, 3, input_size=(5, 5), padding=1, input_indices=(0, 2))
    layer = Mixed([conv, deconv, None], [op], bias=True, shared_bias=shared_bias, dtype=F64)
    randomize(layer, rng)
    assert layer.size == 4 * 25 and layer.bias.shape == ((4,) if shared_bias else (100,))
    inputs = [rows(rng, 50, n=2), rows(rng, 27, n=2), rows(rng, op.filter_width, n=2)]
    check_layer_grad(layer, inputs, elements=3)
    if shared_bias:  # the bias is one value per channel, over all 25 pixels
        y0 = layer(*inputs).value.reshape(2, 4, 25)
        layer.bias.value[1] += 1.0
        diff = layer(*inputs).value.reshape(2, 4, 25) - y0
        np.testing.assert_allclose(diff[:, 1], 1.0)
        np.testing.assert_allclose(diff[:, [0, 2, 3]], 0.0)


def test_mixed_backward_follows_paddles_order(rng):
    """Bias first, then each projection's weight, each firing once, in input order."""
    layer = Mixed(
        [FullMatrixProjection(3, 2), TableProjection(5, 2)], bias=True, act="tanh", name="m"
    )
    fired = []
    forward_backward(
        layer,
        [rows(rng, 3, n=4), Arg(ids=np.array([1, 2, 3, 4]))],
        np.ones((4, 2)),
        lambda p: fired.append(p.name),
    )
    assert fired == ["m.bias", "m.proj0.weight", "m.proj1.weight"]


def test_mixed_float32(rng):
    layer = Mixed([FullMatrixProjection(6, 4), SliceProjection(5, [(0, 2), (3, 5)])], bias=True)
    randomize(layer, rng)
    x, y = (Arg(rng.standard_normal((3, w)).astype(np.float32)) for w in (6, 5))
    assert layer(x, y).value.dtype == np.float32
    assert check_layer_grad(layer, [x, y]).worst <= 0.02


# -- names and parameters --------------------------------------------------------------------------
def test_projection_parameters_follow_the_layer_name(rng):
    layer = Mixed([FullMatrixProjection(3, 2), None], [DotMulOperator(1.0, (1, 1))], bias=True)
    assert [p.name for p in layer.parameters()] == ["Mixed.proj0.weight", "Mixed.bias"]
    net = Network()
    net.add("hidden", layer, inputs=["x", "y"])
    assert [p.name for p in net.parameters()] == ["hidden.proj0.weight", "hidden.bias"]
    assert all(p.shared_count == 1 for p in net.parameters())


def test_two_layers_share_a_table_in_a_network(rng):
    net = Network()
    first = net.add("a", Mixed([TableProjection(6, 3, dtype=F64)]), inputs="ids1")
    table = first.projections[0].weight
    net.add("b", Mixed([TableProjection(6, 3, dtype=F64, weight=table)]), inputs="ids2")
    net.add("sum", Mixed([IdentityProjection(3), IdentityProjection(3)]), inputs=["a", "b"])
    assert net.parameters() == [table] and table.name == "a.proj0.weight"
    fired = []
    net.forward({"ids1": Arg(ids=np.array([0, 5])), "ids2": Arg(ids=np.array([5, 1]))})
    net.backward(fired.append)  # the loss gradient starts at d(sum) = 1
    assert fired == [table]
    np.testing.assert_array_equal(table.grad[:, 0], [1, 1, 0, 0, 0, 2])


# -- Concatenate ----------------------------------------------------------------------------------
def test_concatenate_values_and_gradients(rng):
    a, b, c = rows(rng, 2, n=3), Arg(rng.standard_normal((3, 2, 2))), rows(rng, 1, n=3)
    layer = Concatenate()
    y = layer(a, b, c).value
    np.testing.assert_array_equal(y, np.concatenate([a.value, b.value.reshape(3, 4), c.value], 1))
    dout = rng.standard_normal((3, 7))
    forward_backward(layer, [a, b, c], dout)
    np.testing.assert_array_equal(a.grad, dout[:, :2])
    np.testing.assert_array_equal(b.grad, dout[:, 2:6].reshape(3, 2, 2))
    np.testing.assert_array_equal(c.grad, dout[:, 6:])
    assert layer.parameters() == []
    check_layer_grad(Concatenate(act="tanh"), [a, b, c])


def test_concatenate_skips_inputs_without_gradient(rng):
    data, hidden = Arg(rng.standard_normal((2, 3)), needs_grad=False), rows(rng, 2, n=2)
    forward_backward(Concatenate(), [data, hidden], np.ones((2, 5)))
    assert not data.has_grad and hidden.grad.sum() == 4


# -- Concatenate2 ---------------------------------------------------------------------------------
@pytest.mark.parametrize("bias", [False, True])
def test_concatenate2_gradients(rng, bias):
    projections = [
        FullMatrixProjection(4, 3, dtype=F64),
        ContextProjection(2, 2, -1, trainable_padding=True, dtype=F64),
        TableProjection(5, 2, dtype=F64),
    ]
    layer = randomize(Concatenate2(projections, bias=bias, act="tanh", dtype=F64), rng)
    assert layer.size == 3 + 4 + 2 and layer.columns[1] == slice(3, 7)
    inputs = [rows(rng, 4), rows(rng, 2), Arg(ids=np.array([4, 0, 1, 1, 2, 3, 0, 4, 4]))]
    check_layer_grad(layer, inputs, elements=4)


def test_concatenate2_writes_each_projection_into_its_columns(rng):
    full, ident = FullMatrixProjection(4, 3, dtype=F64), IdentityProjection(5, 2, offset=3)
    layer = randomize(Concatenate2([full, ident], bias=True, dtype=F64), rng)
    a, b = rows(rng, 4), rows(rng, 5)
    want = np.concatenate([a.value @ full.weight.value.T, b.value[:, 3:]], 1) + layer.bias.value
    np.testing.assert_allclose(layer(a, b).value, want, rtol=1e-12)
    dout = rng.standard_normal((9, 5))
    forward_backward(layer, [a, b], dout)
    np.testing.assert_allclose(a.grad, dout[:, :3] @ full.weight.value)
    np.testing.assert_array_equal(b.grad[:, 3:], dout[:, 3:])
    np.testing.assert_array_equal(b.grad[:, :3], 0)


def test_concatenate2_shared_bias_over_stacked_channels(rng):
    first = ConvProjection(2, 3, 3, input_size=(4, 4), padding=1, dtype=F64)
    second = ConvProjection(1, 2, 1, input_size=(4, 4), dtype=F64)
    layer = randomize(Concatenate2([first, second], bias=True, shared_bias=True, dtype=F64), rng)
    assert layer.bias.shape == (5,)
    inputs = [rows(rng, 32, n=2), rows(rng, 16, n=2)]
    check_layer_grad(layer, inputs, elements=3)
    y0 = layer(*inputs).value.reshape(2, 5, 16)
    layer.bias.value[3] += 1.0  # channel 3 is the second projection's first channel
    diff = layer(*inputs).value.reshape(2, 5, 16) - y0
    np.testing.assert_allclose(diff[:, 3], 1.0)
    np.testing.assert_allclose(diff[:, [0, 1, 2, 4]], 0.0)


# -- errors ---------------------------------------------------------------------------------------
def test_mixed_width_mismatch_names_the_projection():
    with pytest.raises(
        LayerError,
        match=r"Mixed 'm': FullMatrixProjection 'proj1' writes 5 columns, but the layer's size is 4"
        r"$",
    ):
        Mixed([FullMatrixProjection(3, 4), FullMatrixProjection(3, 5)], name="m")
    with pytest.raises(LayerError, match="writes 4 columns, but the layer's size is 6"):
        Mixed([FullMatrixProjection(3, 4)], size=6)
    with pytest.raises(LayerError, match="give size"):
        Mixed([None, None], [DotMulOperator()])


def test_mixed_checks_its_inputs():
    with pytest.raises(LayerError, match=r"input\(s\) \[1\] have no projection and no operator"):
        Mixed([FullMatrixProjection(3, 4), None])
    with pytest.raises(LayerError, match=r"DotMulOperator 'op0' reads input\(s\) \[2\], but the"):
        Mixed([None, None], [DotMulOperator(1.0, (0, 2))], size=3)
    with pytest.raises(LayerError, match="proj0 must be a Projection, got int"):
        Mixed([3])
    with pytest.raises(LayerError, match="needs at least one input"):
        Mixed([])
    layer = Mixed([FullMatrixProjection(3, 4), FullMatrixProjection(3, 4)], name="m")
    with pytest.raises(LayerError, match=r"Mixed 'm': expected 2 input\(s\), got 1"):
        layer(Arg(np.zeros((2, 3))))
    with pytest.raises(LayerError, match=r"inputs have different numbers of rows: \[2, 3\]"):
        layer(Arg(np.zeros((2, 3))), Arg(np.zeros((3, 3))))


@pytest.mark.parametrize(
    "make, arg, got",
    [
        (lambda: Mixed([FullMatrixProjection(1, 3)], name="m"), Arg(np.array(2.0)), "a 0-d value"),
        (lambda: Mixed([TableProjection(5, 3)], name="m"), Arg(ids=np.array(2)), "a 0-d ids"),
        (lambda: Mixed([FullMatrixProjection(1, 3)], name="m"), Arg(), "neither values nor ids"),
        (
            lambda: Concatenate2([FullMatrixProjection(1, 3)], name="m"),
            Arg(np.array(2.0)),
            "a 0-d value",
        ),
    ],
)
def test_an_input_without_rows_names_the_layer(make, arg, got):
    """Counting the inputs' rows through Arg.batch_size raised an IndexError on a 0-d value
    (a loss's output wired in by mistake) and a TypeError on 0-d ids or an Arg with neither,
    not a LayerError naming the layer."""
    layer = make()
    with pytest.raises(LayerError, match=rf"'m': input 0 must hold rows \(N, \.\.\.\), got {got}"):
        layer(arg)


def test_shared_bias_needs_convolutions():
    with pytest.raises(LayerError, match="shared_bias needs convolution .*'proj1' is not one"):
        Mixed(
            [ConvProjection(1, 2, 3, input_size=4), FullMatrixProjection(16, 8)],
            bias=True,
            shared_bias=True,
        )
    with pytest.raises(LayerError, match=r"one channel count, parts have \[2, 8\]"):
        Mixed(
            [
                ConvProjection(1, 2, 1, input_size=4),
                ConvProjection(1, 8, 3, input_size=4),
            ],  # 32 columns each
            bias=True,
            shared_bias=True,
        )
    with pytest.raises(
        LayerError, match=r"one output image size, projections give \[\(2, 2\), \(4, 4\)\]"
    ):
        Concatenate2(
            [ConvProjection(1, 2, 1, input_size=4), ConvProjection(1, 2, 3, input_size=4)],
            bias=True,
            shared_bias=True,
        )


def test_concatenate2_and_concatenate_errors():
    with pytest.raises(LayerError, match="input 1 needs a projection"):
        Concatenate2([FullMatrixProjection(3, 4), None])
    with pytest.raises(LayerError, match="input 1 carries no array value"):
        Concatenate(name="c")(Arg(np.zeros((2, 3))), Arg(ids=np.array([0, 1])))
    with pytest.raises(LayerError, match=r"Concatenate 'c': inputs have different numbers of rows"):
        Concatenate(name="c")(Arg(np.zeros((2, 3))), Arg(np.zeros((3, 3))))


def test_one_constructor_for_every_projection_layer(rng):
    a, b = Arg(rng.standard_normal((2, 3))), Arg(rng.standard_normal((2, 5)))
    parts = [FullMatrixProjection(3, 4), IdentityProjection(5, 2)]
    assert Concatenate2(parts, size=6)(a, b).shape == (2, 6)
    with pytest.raises(LayerError, match="size=7, but the projections write 6 columns"):
        Concatenate2([FullMatrixProjection(3, 4), IdentityProjection(5, 2)], size=7)
    with pytest.raises(LayerError, match=r"Concatenate2: takes no operators \(use Mixed\)"):
        Concatenate2([None, None], [DotMulOperator()])
    with pytest.raises(LayerError, match="size=0 must be >= 1"):
        Mixed([FullMatrixProjection(3, 4)], size=0)
