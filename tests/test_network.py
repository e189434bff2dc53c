"""The Network's checks: one object per name, clear errors for bad feeds and calls, and every
trainable parameter firing its callback exactly once per pass, in a fixed order."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.layers import FullyConnected, Mixed, SoftmaxCrossEntropy
from distconv.layers.base import Layer, LayerError
from distconv.layers.projection import FullMatrixProjection
from distconv.models import lenet
from distconv.network import Network, NetworkError
from distconv.optim import create_optimizer

F64 = np.float64


def _classifier(width: int = 4) -> Network:
    net = Network()
    net.add("fc", FullyConnected(width, 3, dtype=F64), inputs="x")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["fc", "label"])
    return net


def _feeds(rng, n: int = 2, width: int = 4) -> dict:
    return {"x": rng.standard_normal((n, width)), "label": Arg(ids=np.arange(n) % 3)}


# -- one layer object, one name -----------------------------------------------------------------
def _loss_and_grad(net, feeds):
    net.zero_grad()
    loss = float(net.forward(feeds)["loss"].value)
    net.backward(lambda p: None)
    return loss


def test_the_same_layer_object_under_two_names_is_refused():
    net = Network()
    fc = FullyConnected(6, 6, act="tanh")
    net.add("a", fc, "image")
    with pytest.raises(NetworkError) as info:
        net.add("b", fc, "a")
    msg = str(info.value)
    assert "already in the network as 'a'" in msg
    assert "the first one's Parameter (weight=first.weight, first = net.add('a', ...))" in msg
    assert list(net.layers) == ["a"]


def test_the_advised_way_to_share_gives_the_right_gradient(rng):
    """Two layers sharing one Parameter: the weight gradient matches finite differences."""
    net = Network()
    a = net.add("a", FullyConnected(3, 3, act="tanh", dtype=F64), "x")
    net.add("b", FullyConnected(3, 3, act="tanh", weight=a.weight, dtype=F64), "a")
    net.add("loss", SoftmaxCrossEntropy(), ["b", "label"])
    feeds = _feeds(rng, 4, 3)
    _loss_and_grad(net, feeds)
    analytic = a.weight.grad.copy()
    numeric = np.zeros_like(analytic)
    h = 1e-6
    for i in np.ndindex(analytic.shape):
        a.weight.value[i] += h
        up = float(net.forward(feeds)["loss"].value)
        a.weight.value[i] -= 2 * h
        down = float(net.forward(feeds)["loss"].value)
        a.weight.value[i] += h
        numeric[i] = (up - down) / (2 * h)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-9)


def test_a_layer_whose_parameter_takes_another_s_name_is_refused_when_added(rng):
    """Parameter names are made of layer names: a Mixed "fc" owns "fc.proj0.weight", and so
    does an FC named "fc.proj0". Accepted, both fired their callbacks in backward before it
    raised "two different parameters are named"."""
    net = Network()
    net.add("fc", Mixed([FullMatrixProjection(4, 4, dtype=F64)]), "x")
    with pytest.raises(NetworkError, match=r"add\('fc.proj0', \.\.\.\): its parameter "):
        net.add("fc.proj0", FullyConnected(4, 3, bias=False, dtype=F64), "fc")
    assert list(net.layers) == ["fc"]


def _tied_pairs() -> tuple[list, list]:
    """Two (owner, reader) pairs of FCs sharing a weight; every layer keeps its default name."""
    owners = [FullyConnected(4, 4, dtype=F64) for _ in range(2)]
    return owners, [FullyConnected(4, 4, dtype=F64, weight=o.weight) for o in owners]


def test_readers_of_two_shared_weights_may_be_added_before_their_owners(rng):
    """Both shared weights are "FullyConnected.weight" until their owners are added and named:
    refused as one name taken twice when the second reader was added."""
    (a, c), (b, d) = _tied_pairs()
    net = Network()
    for name, layer, inputs in [("b", b, "a"), ("d", d, "c"), ("a", a, "x"), ("c", c, "b")]:
        net.add(name, layer, inputs)
    net.add("loss", SoftmaxCrossEntropy(), ["d", "label"])
    net.forward(_feeds(rng))
    net.backward(lambda p: None)
    assert [p.name for p in net.parameters()] == [
        "a.weight",
        "a.bias",
        "b.bias",
        "c.weight",
        "c.bias",
        "d.bias",
    ]


def test_two_parameters_of_one_name_are_refused_before_any_callback_fires(rng):
    """Owners never added keep one name for two weights: backward fired both callbacks (an
    optimizer updated both) before it raised."""
    _, (b, d) = _tied_pairs()
    net = Network()
    net.add("b", b, "x")
    net.add("d", d, "b")
    net.add("loss", SoftmaxCrossEntropy(), ["d", "label"])
    net.forward(_feeds(rng))
    fired = []
    with pytest.raises(NetworkError, match=r"two different parameters are named 'Fully"):
        net.backward(fired.append)
    assert fired == [] and not b.weight.grad.any()


# -- bad calls and feeds ------------------------------------------------------------------------
@pytest.mark.parametrize("thing", [object(), FullyConnected, "fc", None])
def test_add_needs_a_layer(thing):
    with pytest.raises(NetworkError, match=r"add\('fc', \.\.\.\): expected a Layer, got "):
        Network().add("fc", thing, "x")


def test_add_needs_names():
    with pytest.raises(NetworkError, match="inputs must be names, got 5"):
        Network().add("fc", FullyConnected(2, 2), 5)
    with pytest.raises(NetworkError, match="a layer name must be a non-empty string"):
        Network().add("", FullyConnected(2, 2), "x")


@pytest.mark.parametrize(
    "x, message",
    [
        ([[1.0, 2.0, 3.0, 4.0]] * 2, "input 'x' must be an Arg or an array, got list"),
        (None, "input 'x' must be an Arg or an array, got NoneType"),
        (Arg(), "input 'x' is an Arg with neither a value nor ids"),
        (Arg([[1.0, 2.0]]), "input 'x': Arg.value must be an array, got list"),
    ],
)
def test_bad_feeds_are_network_errors(rng, x, message):
    feeds = {**_feeds(rng), "x": x}
    with pytest.raises(NetworkError, match=message):
        _classifier().forward(feeds)


def test_feeds_must_be_a_mapping(rng):
    with pytest.raises(NetworkError, match="expects a mapping .* got list"):
        _classifier().forward([rng.standard_normal((2, 4))])


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, bool])
@pytest.mark.parametrize("wrap", [lambda v: v, Arg])
def test_integer_or_bool_images_name_the_layer(dtype, wrap):
    net = lenet((1, 8, 8), 10)
    images = np.ones((2, 1, 8, 8), dtype)
    with pytest.raises(NetworkError) as info:
        net.forward({"image": wrap(images), "label": Arg(ids=np.array([0, 1]))})
    msg = str(info.value)
    assert msg.startswith("layer Conv2D 'conv1': input 'image' holds ")
    assert "computes in floating point; feed float arrays" in msg


@pytest.mark.parametrize("shape", [(28, 28), (1, 1, 8, 8)])
def test_lenet_wants_an_image_shape_of_channels_height_width(shape):
    """MNIST's (28, 28) stopped on Python's "not enough values to unpack (expected 3, got 2)"."""
    with pytest.raises(
        NetworkError, match=re.escape(f"image_shape must be (C, H, W), got {shape}")
    ):
        lenet(shape)


def test_swapped_loss_inputs_name_the_loss_layer(rng):
    net = Network()
    net.add("fc", FullyConnected(4, 3, dtype=F64), inputs="x")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["label", "fc"])
    msg = r"SoftmaxCrossEntropy 'loss': input 0 must be the logits, got an ids-only Arg"
    with pytest.raises(LayerError, match=msg):
        net.forward(_feeds(rng))
    feeds = {**_feeds(rng), "label": np.array([0, 1])}  # labels as a plain integer array
    with pytest.raises(LayerError, match="input 0 must be float logits, got int64"):
        net.forward(feeds)


def test_backward_with_an_unknown_loss_layer(rng):
    net = _classifier()
    net.forward(_feeds(rng))
    with pytest.raises(NetworkError, match=r"backward\(loss='nope'\): no such layer"):
        net.backward(lambda p: None, loss="nope")


def test_a_layer_added_after_the_loss_is_not_taken_for_the_loss(rng):
    """With no loss named, the last layer in topological order was seeded as the loss: a probe
    head added after the loss and reading only the data was trained, the classifier got a zero
    gradient, and nothing said so. Several unread layers: name the loss."""
    net = _classifier()
    net.add("probe", FullyConnected(4, 2, dtype=F64), inputs="x")
    net.forward(_feeds(rng))
    with pytest.raises(NetworkError, match=r"layers \['loss', 'probe'\] are read by no other"):
        net.backward(lambda p: None)
    assert all(not p.grad.any() for p in net.parameters())
    net.backward(lambda p: None, loss="loss")
    assert net["fc"].weight.grad.any() and not net["probe"].weight.grad.any()


@pytest.mark.parametrize("callback", [None, "sgd", create_optimizer("sgd", lr=0.1)])
def test_a_callback_that_is_not_a_function_is_refused_before_any_gradient(rng, callback):
    """backward(None), or an optimizer where its update goes, failed with "'NoneType' object is
    not callable" (or "'SGD' object ...") at the first parameter, its gradient already added:
    a second try added it twice."""
    net = _classifier()
    net.forward(_feeds(rng))
    with pytest.raises(NetworkError, match=r"backward\(callback\): the callback must be a "):
        net.backward(callback)
    assert all(not p.grad.any() for p in net.parameters())


def test_a_layer_added_between_forward_and_backward(rng):
    net = _classifier()
    net.forward(_feeds(rng))
    net.add("extra", FullyConnected(3, 3), "fc")
    with pytest.raises(NetworkError, match=r"\['extra'\] were added after the last forward"):
        net.backward(lambda p: None)


def test_a_deep_chain_added_from_the_loss_down_is_ordered(rng):
    """The order was found by recursion, one Python frame per layer of the chain below: built
    readers first (from the loss down), a chain of 1500 layers raised RecursionError."""
    from distconv.layers import Activation, MSELoss

    depth = 1500
    net = Network()
    net.add("loss", MSELoss(), [f"a{depth - 1}", "t"])
    for i in reversed(range(depth)):
        net.add(f"a{i}", Activation("tanh"), f"a{i - 1}" if i else "x")
    assert net.order() == [f"a{i}" for i in range(depth)] + ["loss"]
    x = Arg(rng.standard_normal((2, 3)))
    net.forward({"x": x, "t": np.zeros((2, 3))})
    net.backward(lambda p: None)
    assert x.grad.shape == (2, 3) and np.isfinite(x.grad).all()
    net.add("back", Activation("tanh"), "loss2")
    net.add("loss2", Activation("tanh"), "back")
    with pytest.raises(NetworkError, match="cycle through layers back -> loss2 -> back"):
        net.order()


# -- every trainable parameter fires once per pass, in one order ---------------------------------
class _TwoWeights(Layer):
    """y = x * a * b elementwise; fires ``a`` and ``b`` in an order a test can change."""

    def __init__(self, width: int, *, fire=("a", "b"), times=1) -> None:
        super().__init__()
        self.new_param("a", np.ones(width))
        self.new_param("b", np.ones(width))
        self.fire, self.times = fire, times

    def _forward(self, x: Arg):
        a, b = (self._params[k].value for k in "ab")
        return x.value * a * b

    def _backward(self, dz, callback) -> None:
        x = self.inputs[0].value
        a, b = (self._params[k] for k in "ab")
        for p, q in ((a, b), (b, a)):
            if not p.static:
                p.grad += (dz * x * q.value).sum(axis=0)
        for key in self.fire:
            for _ in range(self.times):
                self._params[key].inc_update(callback)


def _net_with(layer: Layer) -> Network:
    net = Network()
    net.add("fc", FullyConnected(4, 3, dtype=F64), "x")
    net.add("mul", layer, "fc")
    net.add("loss", SoftmaxCrossEntropy(), ["mul", "label"])
    return net


def _pass(net, rng, fired=None):
    net.forward(_feeds(rng))
    net.backward((fired if fired is not None else []).append)


def test_firing_order_is_recorded_on_the_first_pass(rng):
    net = _net_with(_TwoWeights(3))
    assert net.firing_order is None
    fired = []
    _pass(net, rng, fired)
    assert net.firing_order == ["mul.a", "mul.b", "fc.bias", "fc.weight"]
    assert [p.name for p in fired] == net.firing_order  # the caller's callback saw each once
    _pass(net, rng)
    assert net.firing_order == ["mul.a", "mul.b", "fc.bias", "fc.weight"]


def test_a_layer_that_forgets_inc_update_fails_the_pass_with_the_parameter_name(rng):
    net = _net_with(_TwoWeights(3, fire=("a",)))
    with pytest.raises(NetworkError) as info:
        _pass(net, rng)
    msg = str(info.value)
    assert "every trainable parameter must fire its callback once; mul.b (0 times)" in msg
    assert "param.inc_update(callback)" in msg


def test_a_parameter_that_fires_twice_is_named_at_its_second_fire(rng):
    """Refused at the second fire, before the callback has it (a sync refused it first,
    naming neither the layer nor the rule), with the layer and the rule."""
    net = _net_with(_TwoWeights(3, times=2))
    said = r"parameter 'mul\.a' fired twice in one backward pass \(first in the backward of "
    with pytest.raises(NetworkError, match=said + r"layer 'mul', again in it\): .*once per pass"):
        _pass(net, rng)


def test_a_later_pass_in_another_order_is_an_error(rng):
    layer = _TwoWeights(3)
    net = _net_with(layer)
    _pass(net, rng)
    layer.fire = ("b", "a")
    with pytest.raises(NetworkError, match="position 0 is 'mul.b', was 'mul.a'"):
        _pass(net, rng)
    net.reset_firing_order()
    _pass(net, rng)
    assert net.firing_order[:2] == ["mul.b", "mul.a"]


def test_static_parameters_are_not_expected_and_freezing_one_is_named(rng):
    layer = _TwoWeights(3)
    net = _net_with(layer)
    _pass(net, rng)
    layer._params["b"].set_static()
    with pytest.raises(NetworkError, match="position 1 is 'fc.bias', was 'mul.b'"):
        _pass(net, rng)
    net.reset_firing_order()
    _pass(net, rng)
    assert net.firing_order == ["mul.a", "fc.bias", "fc.weight"]


def test_adding_a_layer_forgets_the_order(rng):
    net = _classifier()
    _pass(net, rng)
    assert net.firing_order == ["fc.bias", "fc.weight"]
    net.add("more", FullyConnected(3, 3, dtype=F64), "fc")
    assert net.firing_order is None


def test_the_network_alone_counts_users():
    shared = FullyConnected(4, 4, dtype=F64)
    assert shared.weight.shared_count == 0  # building layers counts nothing
    other = FullyConnected(4, 4, weight=shared.weight, dtype=F64)
    assert shared.weight.shared_count == 0
    net = Network()
    net.add("a", shared, "x")
    assert shared.weight.shared_count == 1
    net.add("b", other, "a")
    assert shared.weight.shared_count == 2


@pytest.mark.parametrize("dtype", [np.int64, np.bool_])
def test_integer_features_into_a_fully_connected_layer_name_it(dtype):
    from distconv.layers import FullyConnected, MSELoss

    net = Network()
    net.add("fc", FullyConnected(4, 1), "x")
    net.add("loss", MSELoss(), ["fc", "t"])
    feeds = {"x": Arg(np.ones((2, 4), dtype)), "t": np.zeros((2, 1), np.float32)}
    with pytest.raises(LayerError, match=r"FullyConnected 'fc': input holds (int64|bool) values"):
        net.forward(feeds)


# -- ml_dtypes' floats: bfloat16 is a float, int4 is not ----------------------------------------
def _bfloat16_classifier(ml_dtypes) -> Network:
    net = _classifier()
    for p in net.parameters():
        p.cast(ml_dtypes.bfloat16)
    return net


def test_a_bfloat16_classifier_computes_what_float64_computes_on_the_same_numbers(rng):
    """The fully connected layer and the loss read numpy's kind "f" as "a float" and refused
    bfloat16 (kind "V"), which Trainer(dtype=bfloat16) casts every weight and input to."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    net = _bfloat16_classifier(ml_dtypes)
    x = rng.standard_normal((6, 4)).astype(ml_dtypes.bfloat16)
    labels = Arg(ids=np.arange(6) % 3)
    loss = net.forward({"x": x, "label": labels})["loss"].value
    net.backward(lambda p: None)
    wide = _classifier()
    for p, q in zip(wide.parameters(), net.parameters()):
        p.value[...] = q.value.astype(F64)  # the same numbers, computed in float64
    exact = wide.forward({"x": x.astype(F64), "label": labels})["loss"].value
    wide.backward(lambda p: None)
    np.testing.assert_allclose(float(loss), float(exact), rtol=2**-6)  # a few roundings of 2**-8
    for p, q in zip(wide.parameters(), net.parameters()):
        assert q.grad.dtype == ml_dtypes.bfloat16, q  # the weights train in bfloat16
        scale = np.abs(p.grad).max()
        np.testing.assert_allclose(q.grad.astype(F64), p.grad, rtol=2**-6, atol=2**-7 * scale)


def test_a_bfloat16_feed_holding_nan_is_named(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    net = _bfloat16_classifier(ml_dtypes)
    x = rng.standard_normal((2, 4)).astype(ml_dtypes.bfloat16)
    x[1, 2] = np.nan
    with pytest.raises(NetworkError, match=r"input 'x' of shape \(2, 4\) holds 1 NaN or infinite"):
        net.forward({"x": x, "label": Arg(ids=np.arange(2))})


def test_int4_features_into_a_fully_connected_layer_are_still_refused():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    net = _classifier()
    feeds = {"x": Arg(np.ones((2, 4), ml_dtypes.int4)), "label": Arg(ids=np.arange(2))}
    with pytest.raises(LayerError, match=r"FullyConnected 'fc': input holds int4 values"):
        net.forward(feeds)


def _two_inputs(first: str, second: str, act: str = "relu", stride: int = 2) -> Network:
    from distconv.layers import Concatenate, MaxPool2D

    net = Network()
    net.add("cat", Concatenate(), inputs=[first, second])
    net.add("pool", MaxPool2D(2, stride=stride), inputs="cat")
    net.add("fc", FullyConnected(8, 3, act=act, dtype=F64), inputs="pool")
    return net


def test_the_structure_names_what_parameters_do_not_show():
    """Swapped inputs, another activation or another stride leave every parameter's name,
    shape and dtype as they were: the structure tells such models apart, and
    the job check names the first difference."""
    from distconv.sync.description import first_difference

    base = _two_inputs("a", "b").structure()
    assert base["cat"] == {"type": "Concatenate", "inputs": ["a", "b"], "act": "Linear"}
    assert base["pool"]["geom"]["stride"] == (2, 2) and base["fc"]["act"] == "ReLU"
    assert _two_inputs("a", "b").structure() == base  # a fresh build: the same
    said = {
        "cat.inputs: ['a', 'b'] here, ['b', 'a'] there": _two_inputs("b", "a"),
        "fc.act: 'ReLU' here, 'Tanh' there": _two_inputs("a", "b", act="tanh"),
        "pool.geom.stride: (2, 2) here, (1, 1) there": _two_inputs("a", "b", stride=1),
    }
    for sentence, other in said.items():
        assert first_difference(base, other.structure()) == sentence


def _mixed(part: Any, operators: tuple = ()) -> Network:
    from distconv.layers import Mixed

    net = Network()
    if operators:  # two inputs the operators read
        net.add("mix", Mixed([None, None], list(operators), size=4), inputs=["a", "b"])
    else:
        net.add("mix", Mixed([part]), inputs="a")
    return net


def test_the_structure_names_a_mixed_layer_s_parts():
    """A Mixed layer's projections and operators hold what it computes: another projection
    kind, offset or scale leaves every parameter's name, shape and dtype as they were, and
    the structure (parts and all) was the same before."""
    from distconv.layers import (
        DotMulOperator,
        FullMatrixProjection,
        IdentityProjection,
        TransposedFullMatrixProjection,
    )
    from distconv.sync.description import first_difference

    def names(net: Network) -> list:
        return [[p.name, p.shape] for p in net.parameters()]

    pairs = {
        "mix.projections: [{'type': 'FullMatrixProjection', 'in_width': 4, 'out_width': 4}] "
        "here, [{'type': 'TransposedFullMatrixProjection', 'in_width': 4, 'out_width': 4}] "
        "there": (FullMatrixProjection(4, 4), TransposedFullMatrixProjection(4, 4)),
    }
    for sentence, (ours, theirs) in pairs.items():
        a, b = _mixed(ours), _mixed(theirs)
        assert names(a) == names(b)
        assert first_difference(a.structure(), b.structure()) == sentence
    a, b = _mixed(IdentityProjection(8, 4, offset=0)), _mixed(IdentityProjection(8, 4, offset=4))
    assert "offset" in first_difference(a.structure(), b.structure())
    a = _mixed(None, [DotMulOperator(1.0)])
    b = _mixed(None, [DotMulOperator(2.0)])
    assert names(a) == names(b) == []
    assert "mix.operators: [{" in first_difference(a.structure(), b.structure())
    from distconv.layers.expand import FeatureMapExpand

    a, b = Network(), Network()
    a.add("ex", FeatureMapExpand(3, as_row_vector=True), inputs="x")
    b.add("ex", FeatureMapExpand(3, as_row_vector=False), inputs="x")
    assert first_difference(a.structure(), b.structure()) == (
        "ex.as_row_vector: True here, False there"
    )


def test_a_structure_is_the_same_in_every_process():
    """A setting that is a function, an object of default repr or a numpy scalar is written
    alike by every rank: a function's address differs from process to process,
    so two ranks of one job disagreed, and a numpy scalar offset was left out, so two jobs
    that differ in it agreed."""
    import dataclasses

    from distconv.layers import IdentityProjection
    from distconv.sync.description import first_difference

    class Marker:  # an object with the default repr, "<... object at 0x...>"
        pass

    @dataclasses.dataclass(frozen=True)
    class Recipe:
        weigh: Any
        marker: Any
        scale: Any

    class Weighed(Layer):
        def __init__(self, recipe: Recipe) -> None:
            super().__init__()
            self.recipe = recipe

    def make(scale: Any) -> Network:
        def weigh(v: Any) -> Any:  # a new function object for every network
            return v

        net = Network()
        net.add("w", Weighed(Recipe(weigh, Marker(), scale)), inputs="x")
        return net

    first, second = make(np.float32(0.5)).structure(), make(np.float32(0.5)).structure()
    assert first == second
    weigh = "tests.test_network.test_a_structure_is_the_same_in_every_process.<locals>.make."
    line = make.__code__.co_firstlineno + 1  # a function made in a call: its line too
    assert first["w"]["recipe"] == {
        "weigh": f"<function {weigh}<locals>.weigh line {line}>",  # as the job check writes it
        "marker": "<tests.test_network.test_a_structure_is_the_same_in_every_process."
        "<locals>.Marker object>",
        "scale": 0.5,
    }
    assert first_difference(first, make(np.float32(2.0)).structure()) == (
        "w.recipe.scale: 0.5 here, 2.0 there"
    )
    a = _mixed(IdentityProjection(8, 4, offset=np.int64(0)))
    b = _mixed(IdentityProjection(8, 4, offset=np.int64(4)))
    said = first_difference(a.structure(), b.structure())
    assert "'offset': 0," in said and "'offset': 4," in said


def test_a_namedtuple_setting_is_written_as_its_values():
    """A tuple setting was rebuilt from a generator, which a namedtuple does not take: a layer
    holding one (or a frozen dataclass holding one, which ``dataclasses.asdict`` wrote) failed
    its ``settings`` with a TypeError."""
    import dataclasses
    from collections import namedtuple

    Size = namedtuple("Size", "rows cols")

    @dataclasses.dataclass(frozen=True)
    class Tiling:
        tile: Any

    class Tiled(Layer):
        def __init__(self) -> None:
            super().__init__()
            self.tiling = Tiling(Size(np.int64(2), 3))

    net = Network()
    net.add("t", Tiled(), inputs="x")
    assert net.structure()["t"]["tiling"] == {"tile": (2, 3)}
    assert type(net.structure()["t"]["tiling"]["tile"].rows) is int  # the numpy scalar too


def test_a_structure_is_json_and_stays_what_it_was_through_training():
    """A parameter-server shard keeps the first hello's description: a restarted worker's
    fresh model, or a second fit of one that trained, must describe itself the same."""
    import json

    from tests.test_mixed_model import build_network, train

    net = build_network()
    before = json.dumps(net.structure(), sort_keys=True)
    assert json.dumps(build_network().structure(), sort_keys=True) == before
    train(net, steps=2)
    assert json.dumps(net.structure(), sort_keys=True) == before
    assert '"type": "ContextProjection"' in before and '"context_start": -2' in before


@pytest.mark.parametrize(
    "feed, wrap, said",
    [
        ("x", lambda t: t, r"input 'x' must be an Arg or an array, got Tensor \(numpy or cupy; a "),
        ("x", lambda t: Arg(t), r"input 'x': Arg.value must be an array, got Tensor \(numpy or "),
        ("label", lambda t: Arg(ids=t[:, 0].long()), r"input 'label': Arg.ids must be an array, "),
    ],
)
def test_a_torch_tensor_fed_is_refused_naming_the_input(rng, feed, wrap, said):
    """A torch tensor has a dtype and a shape, so it passed as an array and failed with
    "Cannot interpret 'torch.float32' as a data type" (labels: "'torch.dtype' object has no
    attribute 'kind'"), naming no input."""
    torch = pytest.importorskip("torch")
    feeds = {**_feeds(rng), feed: wrap(torch.rand(2, 4))}
    with pytest.raises(NetworkError, match=said):
        _classifier().forward(feeds)
