"""Telling whose a layer's error is (a callback's, a feed's, a frozen weight's) reads the
objects it comes upon as Python made them: no code of one's own runs (a ``__getattr__``, a
property, a metaclass's), and an error from one never comes out in place of the layer's."""

import time

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers.base import Layer, LayerError
from distconv.layers.fc import FullyConnected
from distconv.layers.mixed import Mixed
from distconv.layers.part import Projection, WeightSpec
from distconv.network import NetworkError
from tests.layers.blame_checks import assert_casting_error_comes_out, frozen_bias_run_forward
from tests.layers.researcher_layers import Scale

BOOL_FEEDS = {"x": Arg(np.ones((4, 3))), "mask": Arg(np.ones((4, 3), bool))}


class Delegates:
    """A sync strategy that hands unknown attributes on to what it wraps, a dict of its own:
    asked for ``__func__``, it raises KeyError."""

    def __init__(self) -> None:
        self.seen = []
        self._inner = {}

    def __getattr__(self, name):
        return self._inner[name]

    def __call__(self, p) -> None:
        self.seen.append(p.name)


def test_a_callback_s_own_getattr_is_not_run_by_backward():
    """Each backward asked its callback ``getattr(callback, "__func__", callback)`` to tell
    a C function (which gets a frame of its own) from a Python one: a callback's own
    ``__getattr__`` ran, on the healthy path, and its KeyError came out of every backward."""
    layer = Scale(3, name="scale")
    layer.forward(Arg(np.ones((2, 3))))
    layer.output.grad = np.ones((2, 3))
    sync = Delegates()
    layer.backward(sync)
    assert sync.seen == ["scale.w", "scale.b"]


class Guarded(type):
    """A metaclass that answers for its classes itself (an ORM's, a registry's): asked what
    Python keeps for them, it raises."""

    def __getattribute__(cls, name):
        if name in ("__module__", "__mro__", "__dict__"):
            raise RuntimeError(f"the registry refused {name}")
        return type.__getattribute__(cls, name)


class Record(metaclass=Guarded):
    pass


#: a class made by code of one's own, which left no module
Generated = type("Generated", (), {"__module__": None})


class HoldsOwn(Layer):
    """Holds an object of one's own while numpy refuses its bool feed."""

    num_inputs = 2

    def __init__(self, make) -> None:
        super().__init__()
        self.make = make

    def _forward(self, x, mask):
        held = self.make()  # noqa: F841  (a variable the error's reading comes upon)
        np.subtract(mask.value, mask.value)  # numpy: "boolean subtract ... not supported"
        return x.value


@pytest.mark.parametrize("make", [Record, Generated], ids=["a metaclass's", "no module"])
def test_a_variable_s_class_is_read_as_python_made_it(make):
    """Whether each variable of a failing forward was an array was asked first of its
    class's ``__module__``: a metaclass's own ``__getattribute__`` ran (and raised), and a
    class whose ``__module__`` is None raised "'NoneType' object has no attribute
    'startswith'", in place of "input 'mask' holds bool values"."""
    net = Network()
    net.add("own", HoldsOwn(make), inputs=["x", "mask"])
    with pytest.raises(NetworkError, match=r"input 'mask' holds bool values"):
        net.forward(BOOL_FEEDS)


class CountsInRecord(Layer):
    num_inputs = 2

    def __init__(self) -> None:
        super().__init__()
        self.tally = Record()
        self.tally.seen = np.zeros(3, np.int64)

    def _forward(self, x, labels):
        self.tally.seen += x.value.sum(0)  # numpy: "... output from float64 to int64"
        return x.value + labels.value


def test_a_written_attribute_s_owner_is_read_as_python_made_it():
    """Whose int64 buffer a write refused was read from ``vars(kind)`` along
    ``type(owner).__mro__``: a metaclass's own ``__getattribute__`` ran, and its
    RuntimeError came out of forward in place of numpy's casting error."""
    assert_casting_error_comes_out(CountsInRecord())


class Staged(Arg):
    """An Arg whose values are loaded once, where first asked (a staged batch of one's own):
    asked again, they are gone."""

    __slots__ = ("_load",)

    def __init__(self, load) -> None:
        super().__init__()
        self._load = load

    @property
    def value(self):
        load, self._load = self._load, None
        if load is None:
            raise RuntimeError("the staged values were loaded already")
        return load()

    @value.setter
    def value(self, v) -> None:
        pass


class UsesStaged(Layer):
    num_inputs = 2

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def _forward(self, x, mask):
        staged = Staged(lambda: np.zeros(3, np.int64))
        if self.how == "writes into it":  # numpy: "... output from float64 to int64"
            np.add(x.value.sum(0), 0.5, out=staged.value)
        counts = staged.value.sum() if self.how == "holds it" else 0  # noqa: F841  (loaded)
        np.subtract(mask.value, mask.value)  # numpy: "boolean subtract ... not supported"
        return x.value


@pytest.mark.parametrize("how", ["writes into it", "holds it"])
def test_an_arg_s_value_property_of_one_s_own_is_not_run(how):
    """An Arg's values were read as ``arg.value``, which runs an Arg subclass's own
    ``value`` property: a staged Arg's RuntimeError ("loaded already") came out of forward in
    place of numpy's casting error, or of "input 'mask' holds bool values"."""
    net = Network()
    net.add("own", UsesStaged(how), inputs=["x", "mask"])
    error = TypeError if how == "writes into it" else NetworkError
    with pytest.raises(error, match=r"^Cannot cast ufunc|input 'mask' holds bool") as e:
        net.forward(BOOL_FEEDS)
    assert how == "holds it" or type(e.value) is not NetworkError, e.value


class HoldsIds(Layer):
    num_inputs = 2

    def _forward(self, x, mask):
        ids = list(range(2_000_000))  # noqa: F841  (a list of ids, as a forward may keep)
        np.subtract(mask.value, mask.value)  # numpy: "boolean subtract ... not supported"
        return x.value


def test_a_forward_holding_a_long_list_fails_in_no_time():
    """The arrays a failing forward held were looked for in each item of each of its lists:
    one of two million ids took seconds to tell "input 'mask' holds bool values"; a list too
    long to read leaves them unknown, which the feed's dtype answers."""
    net = Network()
    net.add("own", HoldsIds(), inputs=["x", "mask"])
    started = time.perf_counter()
    with pytest.raises(NetworkError, match=r"input 'mask' holds bool values"):
        net.forward(BOOL_FEEDS)
    assert time.perf_counter() - started < 1.5


class WrongShape(TypeError, ValueError):
    """An error of one's own whose ``__str__`` formats what it never set (a bug of its own)."""

    def __init__(self, shape) -> None:
        super().__init__(shape)
        self.shape = shape

    def __str__(self) -> str:
        return f"needs {self.shape[5]} columns"


class RaisesOwn(Scale):
    """Raises an error of its own class in forward or in backward."""

    num_inputs = (1, 2)

    def __init__(self, where: str) -> None:
        super().__init__(3)
        self.where = where

    def _forward(self, x, *rest):
        if self.where == "forward":
            raise WrongShape(x.value.shape)
        return x.value

    def _backward(self, dz, callback):
        raise WrongShape(dz.shape)


@pytest.mark.parametrize("where", ["forward", "backward"])
def test_an_error_whose_own_str_fails_is_still_the_one_raised(where):
    """Whose a layer's TypeError was (a feed's, a frozen weight's), and the layer's name put
    in its ValueError, were read from ``str(exc)``: an error of one's own whose ``__str__``
    fails had its IndexError come out of forward or backward in place of it."""
    layer = RaisesOwn(where)
    layer.b.set_static(True)
    net = Network()
    net.add("own", layer, inputs=["x", "mask"])
    with pytest.raises(WrongShape) as e:
        net.forward(BOOL_FEEDS)
        layer.output.grad = np.ones((4, 3))
        layer.backward(lambda p: None)
    assert isinstance(e.value, LayerError) or where == "backward"


class WrongWidth(ValueError):
    """A ValueError of one's own whose ``__str__`` formats what it never set."""

    def __str__(self) -> str:
        return f"needs {self.width} columns"


class RefusesOwn(Projection):
    """``out += x * w``, raising an error of its own in the pass named ``broken``."""

    def __init__(self, broken: str) -> None:
        super().__init__(3, 3, WeightSpec((3,), dtype=np.float64))
        self.broken = broken

    def forward(self, input, out):
        if self.broken == "forward":
            raise WrongWidth()
        out += input.value * self.weight.value

    def _backward(self, input, dout):
        raise WrongWidth()


@pytest.mark.parametrize("broken", ["forward", "backward"])
def test_a_part_s_error_whose_own_str_fails_still_names_the_part(broken):
    """A Mixed layer's projection of one's own named itself in its ValueError with
    ``str(exc)``: one whose ``__str__`` fails had that AttributeError come out instead."""
    layer = Mixed([RefusesOwn(broken)], name="mix")
    with pytest.raises(WrongWidth, match=r"RefusesOwn 'proj0'.*str\(\) failed"):
        layer.forward(Arg(np.ones((4, 3)), needs_grad=True))
        layer.output.grad = np.ones((4, 3))
        layer.backward(lambda p: None)


class BrokenText(ValueError):
    """An initialiser's error of its own whose ``__str__`` fails, as :class:`WrongShape`'s."""

    def __str__(self) -> str:
        return f"needs {self.args[5]} rows"


@pytest.mark.parametrize(("error", "caught"), [(WrongShape, TypeError), (BrokenText, BrokenText)])
def test_an_initialiser_s_error_whose_own_str_fails_still_names_the_weight(error, caught):
    """``make_weight`` named the weight in an initialiser's error with ``str(exc)``: one of
    one's own whose ``__str__`` fails had its IndexError come out of the constructor."""

    def init(shape, fan_in, fan_out, rng):
        raise error((3,))

    with pytest.raises(caught, match=r"FullyConnected.*weight.*str\(\) failed") as e:
        FullyConnected(3, 2, init=init)
    assert isinstance(e.value, LayerError), type(e.value)


class Compared(type):
    """A metaclass that compares its classes itself (a registry's, an ORM's): asked, it
    raises."""

    def __eq__(cls, other):
        raise RuntimeError("the registry refused ==")

    __hash__ = type.__hash__


class Key(metaclass=Compared):
    """A key, and a box of items, of a class whose metaclass compares it."""

    def __getitem__(self, key):
        return None

    def __setitem__(self, key, value):
        pass


class AddsThroughKeys(Scale):
    """Adds into its frozen bias's gradient through a dict keyed by a Key, or through a Key's
    own item."""

    def __init__(self, how: str) -> None:
        super().__init__(3)
        self.how = how

    def _backward(self, dz, callback):
        key = Key()
        if self.how == "a dict keyed by it":
            grads = {key: self.b.grad}
            grads[key] += dz.sum(0)
        else:
            key[0] += dz.sum(0)


@pytest.mark.parametrize("how", ["a dict keyed by it", "its own item"])
def test_a_key_s_metaclass_is_not_asked_to_compare_its_class(how):
    """``type(key) in (int, str)`` and ``type(owner) in (list, tuple)`` compared classes with
    ``==``, which runs a metaclass's own ``__eq__`` (the reflected one first): its error came
    out of backward in place of the line's own TypeError (a key of one's own is not read: its
    ``__hash__`` and ``__eq__`` would run, so the advice is not given either)."""
    layer = frozen_bias_run_forward(AddsThroughKeys(how))
    with pytest.raises(TypeError, match="unsupported operand type.*'NoneType'"):
        layer.backward(lambda p: None)
