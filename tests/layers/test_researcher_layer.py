"""A layer of one's own, written from the Layer docstring: what its mistakes are told."""

import dataclasses

import numpy as np
import pytest

from distconv import Arg, Network, Parameter, Trainer
from distconv.gradient_check import check_layer_grad
from distconv.kernels.activation import ActivationFunction
from distconv.layers import FullyConnected, MSELoss, SoftmaxCrossEntropy
from distconv.layers.base import Layer, LayerTypeError, values_of
from distconv.layers.mixed import Mixed
from distconv.layers.operator import Operator
from distconv.layers.part import Projection
from distconv.network import NetworkError
from distconv.optim import SGD
from distconv.sync.local import LocalSync
from distconv.sync.ps.wire import WireError

F64 = np.float64


class Scale(Layer):
    """``x * w + b`` per feature, its backward written without a thought for frozen weights."""

    def __init__(self, n: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.w = self.new_param("w", np.ones(n, F64))
        self.b = self.new_param("b", np.zeros(n, F64))

    def _forward(self, x):
        return values_of(self, x) * self.w.value + self.b.value

    def _backward(self, dz, callback):
        x = self.inputs[0]
        if x.needs_grad:
            x.grad += dz * self.w.value
        self.w.grad += (dz * x.value).sum(0)
        self.b.grad += dz.sum(0)
        self.w.inc_update(callback)
        self.b.inc_update(callback)


def test_adding_into_a_frozen_weight_names_the_layer_and_the_weight(rng):
    """A static parameter's grad is None: the backward failed with numpy's bare "unsupported
    operand type(s) for +=: 'NoneType'", naming neither the layer nor the weight."""
    net = Network()
    net.add("scale", Scale(4), inputs="x")
    net.add("fc", FullyConnected(4, 3, dtype=F64), inputs="scale")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["fc", "label"])
    net["scale"].w.set_static(True)
    net.forward({"x": rng.standard_normal((5, 4)), "label": Arg(ids=np.arange(5) % 3)})
    with pytest.raises(LayerTypeError, match=r"Scale 'scale': .*\['scale.w'\] have no gradient"):
        net.backward(lambda p: None)


def test_the_gradient_checker_s_static_pass_names_them_too(rng):
    """check_layer_grad freezes every parameter for its last pass: the same bare TypeError."""
    with pytest.raises(LayerTypeError, match=r"\['Scale.w', 'Scale.b'\] have no gradient"):
        check_layer_grad(Scale(3), [Arg(rng.standard_normal((4, 3)))])


class Doubling(Layer):
    """``2 x``, with a backward that is wrong: it adds ``3 dz``."""

    def _forward(self, x):
        return 2 * values_of(self, x)

    def _backward(self, dz, callback):
        if self.inputs[0].needs_grad:
            self.inputs[0].grad += 3 * dz


@pytest.mark.parametrize("frozen", [False, True])
def test_a_check_with_nothing_to_check_is_refused_not_passed(rng, frozen):
    """Data fed as the README feeds it (``needs_grad=False``) to a layer with no parameter, or
    one whose parameters are all static: the report was empty, and a wrong backward passed."""
    layer = Doubling() if not frozen else Scale(3)
    for p in layer.parameters():
        p.set_static(True)
    x = Arg(rng.standard_normal((4, 3)), needs_grad=False)
    with pytest.raises(ValueError, match=r"nothing to check: no parameter trains, no input"):
        check_layer_grad(layer, [x])
    x.needs_grad = True  # as asked: the wrong backward is found
    if not frozen:
        with pytest.raises(AssertionError, match=r"gradient of input 0 is off"):
            check_layer_grad(layer, [x])


class Gain(Layer):
    """``x * w``, its weight made outside and registered under a name of the caller's."""

    def __init__(self, weight: Parameter, **kwargs) -> None:
        super().__init__(**kwargs)
        self.w = self.add_param("w", weight)

    def _forward(self, x):
        return values_of(self, x) * self.w.value

    def _backward(self, dz, callback):
        x = self.inputs[0]
        if x.needs_grad:
            x.grad += dz * self.w.value
        self.w.grad += (dz * x.value).sum(0)
        self.w.inc_update(callback)


def test_two_parameters_of_one_name_are_refused_naming_both_layers():
    """Each layer made its own Parameter("w"): "two different parameters are named 'w'" named
    neither layer that holds one."""
    net = Network()
    net.add("first", Gain(Parameter("w", np.ones(3))), inputs="x")
    net.add("second", Gain(Parameter("w", np.ones(3))), inputs="first")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["second", "label"])
    with pytest.raises(NetworkError, match=r"named 'w', in layers 'first' and 'second': "):
        Trainer(net, LocalSync(SGD(lr=0.1)), batch_size=4)


def test_a_shape_error_in_a_forward_of_one_s_own_names_the_layer(rng):
    """Two Scale layers, one fed 6 features for its 4: numpy's "operands could not be broadcast
    together" named neither. It names the layer now, and keeps the line it came from."""
    net = Network()
    net.add("wide", Scale(6), inputs="x")
    net.add("narrow", Scale(4), inputs="wide")
    with pytest.raises(ValueError, match=r"^Scale 'narrow': operands could not be broadcast") as e:
        net.forward({"x": rng.standard_normal((5, 6))})
    assert "could not be broadcast" in str(e.value.__cause__)


class NoBase(Layer):
    """Keeps its own fields and never calls Layer.__init__."""

    def __init__(self, n: int) -> None:
        self.n = n

    def _forward(self, x):
        return 2 * values_of(self, x)


class ParamsFirst(Layer):
    """Makes its weight before Layer.__init__ has run."""

    def __init__(self, n: int) -> None:
        self.w = self.new_param("w", np.ones(n))
        super().__init__()


class CallsNoBase(NoBase):
    """Calls its parent's __init__, as it should: the parent is the one that skips the base."""

    def __init__(self, n: int) -> None:
        super().__init__(n)


class ParamLater(Gain):
    """Makes its Parameter before calling the base, as it may: the base runs before it adds."""

    def __init__(self, n: int) -> None:
        weight = Parameter("w", np.ones(n))
        super().__init__(weight, act="tanh")


def test_a_layer_whose_init_skips_the_base_s_is_told_where_it_is_made():
    """Each was made (or failed) with a bare AttributeError: "'NoBase' object has no attribute
    '_owned'" at Network.add, "'ParamsFirst' object has no attribute 'name'" in new_param."""
    with pytest.raises(TypeError, match=r"NoBase.__init__ returned without calling super"):
        NoBase(3)
    with pytest.raises(TypeError, match=r"ParamsFirst.__init__ failed \(.*'name'\) before call"):
        ParamsFirst(3)
    with pytest.raises(TypeError, match=r"^NoBase.__init__ returned without calling super"):
        CallsNoBase(3)  # the class whose __init__ skipped it, not the one being made
    layer = ParamLater(3)
    assert layer.w.name == "w" and type(layer.act).__name__ == "Tanh"


class ForwardOnly(Layer):
    """Written for a forward pass, its backward left for later."""

    def _forward(self, x):
        return 2 * values_of(self, x)


def test_a_layer_without_a_backward_names_itself_and_what_it_lacks(rng):
    """A bare NotImplementedError with no message, from the base class's placeholder."""
    net = Network()
    net.add("double", ForwardOnly(), inputs="x")
    net.add("loss", MSELoss(), inputs=["double", "target"])
    net.forward({"x": rng.standard_normal((4, 3)), "target": rng.standard_normal((4, 3))})
    with pytest.raises(NotImplementedError, match=r"^ForwardOnly 'double' has no _backward\("):
        net.backward(lambda p: None)


class ReturnsArg(Layer):
    """Returns its output wrapped, as forward does, where _forward returns the array."""

    def _forward(self, x):
        return Arg(2 * values_of(self, x))


def test_a_forward_that_returns_no_array_is_named_not_met_in_the_next_layer(rng):
    """The next layer failed on it: "FullyConnected 'fc': 'Arg' object has no attribute
    'ndim'", naming the layer that was handed it, not the one that made it."""
    net = Network()
    net.add("double", ReturnsArg(), inputs="x")
    net.add("fc", FullyConnected(3, 2, dtype=F64), inputs="double")
    with pytest.raises(LayerTypeError, match=r"^ReturnsArg 'double': _forward returned Arg, not"):
        net.forward({"x": rng.standard_normal((4, 3))})


class MaskReturnsArg(Layer):
    """Takes an integer mask as values (its own choice) and returns its output wrapped."""

    num_inputs = 2

    def _forward(self, x, mask):
        return Arg(x.value * mask.value)


def test_a_forward_that_returns_no_array_is_not_blamed_on_an_integer_input(rng):
    """A Network turned any TypeError of a layer fed integer values into "input 'mask' holds
    int64 values ... feed float arrays": the layer's own mistake was blamed on its feed."""
    net = Network()
    net.add("masked", MaskReturnsArg(), inputs=["x", "mask"])
    feeds = {"x": Arg(rng.standard_normal((4, 3))), "mask": Arg(np.ones((4, 3), np.int64))}
    with pytest.raises(LayerTypeError, match=r"^MaskReturnsArg 'masked': _forward returned Arg"):
        net.forward(feeds)


class Config:
    """A layer's settings, read in its ``__init__`` before the base's."""

    width = 3


class ReadsConfig(Layer):
    """Reads a setting its config lacks before calling the base, as a typo does."""

    def __init__(self, config: Config) -> None:
        self.width = config.widht  # the typo: its own AttributeError, not a skipped base
        super().__init__()


def test_an_attribute_error_of_the_layer_s_own_passes_as_it_is():
    """A config's typo read before super().__init__() was re-raised as a TypeError saying the
    base was skipped and to call it before new_param: neither was the matter."""
    with pytest.raises(AttributeError, match=r"'Config' object has no attribute 'widht'"):
        ReadsConfig(Config())


def test_a_callback_s_type_error_is_not_blamed_on_a_frozen_weight(rng):
    """A callback (a sync's, an optimizer's) whose TypeError mentioned None, in a layer with a
    frozen bias, was re-raised as "static parameter(s) ['fc.bias'] have no gradient": the
    bias was never added into, and the callback's own error was hidden behind the advice."""
    net = Network()
    net.add("fc", FullyConnected(3, 2, dtype=F64), inputs="x")
    net.add("loss", MSELoss(), inputs=["fc", "target"])
    net["fc"].bias.set_static(True)
    net.forward({"x": rng.standard_normal((4, 3)), "target": rng.standard_normal((4, 2))})

    def callback(p):
        raise TypeError("'NoneType' object is not subscriptable")  # the callback's own bug

    with pytest.raises(TypeError, match=r"^'NoneType' object is not subscriptable$") as e:
        net.backward(callback)
    assert not isinstance(e.value, LayerTypeError)


class TwoGains(Layer):
    """``x * a * b``, its two weights made outside, each named "w" by the caller."""

    def __init__(self) -> None:
        super().__init__()
        self.a = self.add_param("a", Parameter("w", np.ones(3)))
        self.b = self.add_param("b", Parameter("w", np.ones(3)))

    def _forward(self, x):
        return values_of(self, x) * self.a.value * self.b.value


def test_two_parameters_of_one_name_in_one_layer_are_said_to_be_in_one():
    """Refused as "in layers 'gains' and 'gains'", with the advice to pass one Parameter to
    both layers to share it: there is one layer, and sharing would make a different model."""
    net = Network()
    net.add("gains", TwoGains(), inputs="x")
    with pytest.raises(NetworkError, match=r"named 'w', both in layer 'gains': .*rename one$"):
        net.parameters()


class Doubled(Projection):
    """``out += 2 x``, written for the forward pass, its backward left for later."""

    def __init__(self, width: int) -> None:
        super().__init__(width, width)

    def forward(self, input, out):
        out += 2 * input.value


class Summed(Operator):
    """``out += a + b``, likewise."""

    def forward(self, inputs, out):
        out += inputs[0].value + inputs[1].value


def test_a_part_without_its_own_backward_names_itself_and_its_layer(rng):
    """A projection or an operator of one's own, its backward left for later, stopped training
    with the bare NotImplementedError of the part's placeholder, as a layer's did."""
    x = rng.standard_normal((4, 3))
    for parts, inputs, lacks in [
        ({"projections": [Doubled(3)]}, [Arg(x)], r"Doubled 'proj0': has no _backward\("),
        (
            {"projections": [None, None], "operators": [Summed([0, 1], 3)]},
            [Arg(x), Arg(x)],
            r"Summed 'op0': has no backward\(",
        ),
    ]:
        layer = Mixed(**parts, name="mix")
        layer.forward(*inputs)
        layer.output.grad = np.ones_like(x)
        with pytest.raises(NotImplementedError, match=rf"^Mixed 'mix': {lacks}"):
            layer.backward(lambda p: None)


class SumForgotten(Scale):
    """Its weight's gradient is added unsummed over the batch: numpy cannot broadcast it."""

    def _backward(self, dz, callback):
        self.w.grad += dz * self.inputs[0].value  # (N, n) into (n,)
        self.w.inc_update(callback)


@pytest.mark.parametrize("layer", [SumForgotten, Scale])
def test_a_shape_error_in_a_backward_of_one_s_own_names_the_layer(rng, layer):
    """numpy's "non-broadcastable output operand with shape (4,)" named no layer, where the
    same error in a forward did; a callback's own ValueError (a sync's wire) still passes as
    it is, not relabelled as the layer's."""
    net = Network()
    net.add("scale", layer(4), inputs="x")
    net.add("loss", MSELoss(), inputs=["scale", "target"])
    net.forward({"x": rng.standard_normal((5, 4)), "target": rng.standard_normal((5, 4))})

    def callback(p):
        raise WireError("the server refused the push")

    if layer is SumForgotten:
        with pytest.raises(ValueError, match=r"^SumForgotten 'scale': backward: non-broad") as e:
            net.backward(callback)
        assert "non-broadcastable" in str(e.value.__cause__)
    else:
        with pytest.raises(WireError, match=r"^the server refused the push$"):
            net.backward(callback)


@dataclasses.dataclass(eq=False)
class Widths(Layer):
    """A dataclass layer whose made-up ``__init__`` never calls the base's: the dataclass sets
    it after ``__init_subclass__`` wrapped the class's own, so the check never saw it."""

    width: int = 3


def test_a_dataclass_layer_that_skips_the_base_s_init_is_told_so_when_added():
    """It was added with "'Widths' object has no attribute '_owned'", the far-away error the
    base-init check names; one calling the base in __post_init__ is added as before."""
    net = Network()
    with pytest.raises(TypeError, match=r"^Widths was made without calling super\(\).__init__"):
        net.add("w", Widths(), inputs="x")

    @dataclasses.dataclass(eq=False)
    class PostInit(Widths):
        def __post_init__(self) -> None:
            Layer.__init__(self)  # the base's: super() reaches Widths' dataclass __init__

    assert net.add("w", PostInit(), inputs="x").name == "w"


class FiresDirectly(Scale):
    """Hands its complete gradients to the callback itself, as a layer of one's own may, not
    through ``inc_update`` (each fires once: the Network accepts it)."""

    def _backward(self, dz, callback):
        self.w.grad += (dz * self.inputs[0].value).sum(0)
        callback(self.w)
        if not self.b.static:
            self.b.grad += dz.sum(0)
            callback(self.b)


@pytest.mark.parametrize(
    ("error", "frozen"),
    [(WireError("the server refused the push"), False), (TypeError("'NoneType' object"), True)],
)
def test_a_callback_s_error_passes_as_it_is_when_the_layer_calls_it_itself(rng, error, frozen):
    """Only a traceback through Parameter.inc_update was the callback's: called by the layer,
    the sync's WireError became "FiresDirectly 'scale': backward: the server refused ...", a
    LayerError a caller catching WireError missed, and a TypeError mentioning None was blamed
    on the frozen bias."""
    net = Network()
    net.add("scale", FiresDirectly(4), inputs="x")
    net.add("loss", MSELoss(), inputs=["scale", "target"])
    net["scale"].b.set_static(frozen)
    net.forward({"x": rng.standard_normal((5, 4)), "target": rng.standard_normal((5, 4))})

    def callback(p):
        raise error

    with pytest.raises(type(error)) as e:
        net.backward(callback)
    assert e.value is error


class BaseTwice(Scale):
    """Calls the base again after making its weights, to set the activation."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        super(Scale, self).__init__(act="tanh")


def test_a_second_base_init_is_refused_not_left_to_drop_the_weights_made_since():
    """The second Layer.__init__ emptied the registry: the network held no parameter, and
    w and b never trained, without a word."""
    with pytest.raises(TypeError, match=r"^BaseTwice: a second Layer.__init__ drops \['w'"):
        BaseTwice(3)


class Square(ActivationFunction):
    """``z ** 2``, its backward reading one row too few: numpy cannot broadcast it."""

    name = "square"

    def forward(self, z, inplace=False):
        return z * z

    def backward(self, y, dy):
        return 2 * dy * y[:-1]


def test_a_shape_error_in_an_activation_s_backward_names_the_layer(rng):
    """Its forward's error named the layer (Layer.forward runs it through checked), its
    backward's, numpy's bare "operands could not be broadcast together", named none. numpy's
    error is chained, as a _backward's is (checked() dropped it, and the activation's line)."""
    net = Network()
    net.add("fc", FullyConnected(3, 4, act=Square(), dtype=F64), inputs="x")
    net.add("loss", MSELoss(), inputs=["fc", "target"])
    net.forward({"x": rng.standard_normal((5, 3)), "target": rng.standard_normal((5, 4))})
    with pytest.raises(ValueError, match=r"^FullyConnected 'fc': operands could not be broad") as e:
        net.backward(lambda p: None)
    assert "could not be broadcast" in str(e.value.__cause__)


class MaskTypo(MaskReturnsArg):
    """Takes an integer mask as values, its own code failing with a TypeError of its own."""

    def _forward(self, x, mask):
        return x.value * mask.value * len(mask.value.shape[0])


def test_a_layer_s_own_type_error_is_not_blamed_on_an_integer_input(rng):
    """34db94b2 let one such error through (a _forward returning no array), but any other
    TypeError of the layer's own, here "object of type 'int' has no len()", was still told
    "input 'mask' holds int64 values ... feed float arrays"; numpy's casting error still is."""
    net = Network()
    net.add("masked", MaskTypo(), inputs=["x", "mask"])
    feeds = {"x": Arg(rng.standard_normal((4, 3))), "mask": Arg(np.ones((4, 3), np.int64))}
    with pytest.raises(TypeError, match=r"^object of type 'int' has no len\(\)$"):
        net.forward(feeds)

    class Halves(MaskReturnsArg):
        def _forward(self, x, mask):
            mask.value *= 0.5  # numpy: "Cannot cast ufunc 'multiply' output ... to int64"
            return x.value * mask.value

    net = Network()
    net.add("halves", Halves(), inputs=["x", "mask"])
    with pytest.raises(NetworkError, match=r"input 'mask' holds int64 values"):
        net.forward(feeds)


class MaskNegated(MaskReturnsArg):
    """Masks with the negated mask, which numpy refuses for bool values with a TypeError whose
    words are neither "cast" nor "ufunc"."""

    def _forward(self, x, mask):
        return x.value * -mask.value  # "The numpy boolean negative, the `-` operator, is not ..."


def test_numpy_s_refusal_of_bool_arithmetic_is_still_blamed_on_the_bool_feed(rng):
    """d6021e7d kept only casting errors ("cast", "ufunc") for the feed: numpy's bool refusals
    ("numpy boolean subtract", "... boolean negative") passed bare, no longer naming the bool
    feed that caused them, as they did before."""
    net = Network()
    net.add("masked", MaskNegated(), inputs=["x", "mask"])
    feeds = {"x": Arg(rng.standard_normal((4, 3))), "mask": Arg(np.ones((4, 3), bool))}
    with pytest.raises(NetworkError, match=r"input 'mask' holds bool values") as e:
        net.forward(feeds)
    assert "boolean negative" in str(e.value.__cause__)
