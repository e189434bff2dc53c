"""A layer of one's own failing in ways the base's error paths must name right: how to fix a
repeated base ``__init__``, whose error a C callback's is, a ``ValueError`` subclass still
catchable by its type, the feed blamed by identity, a dataclass layer run by hand."""

import copy
import functools
import operator
import pickle

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers.base import Layer, LayerError, LayerTypeError, checked
from distconv.network import NetworkError
from tests.layers.researcher_layers import Scale
from tests.layers.test_researcher_base_init import BaseTwice, Widths
from tests.layers.test_researcher_callbacks import FiresDirectly


def test_a_second_base_init_says_how_to_fix_it():
    """The message "BaseTwice: a second Layer.__init__ drops [...]" said what went wrong, not what
    to write instead: pass act= on through the parent's __init__, calling the base once."""
    with pytest.raises(TypeError, match=r"drops \['w', 'b'\]; call it once, before new_param") as e:
        BaseTwice(3)
    assert "super().__init__(..., act=...)" in str(e.value)


@pytest.mark.parametrize(
    ("callback", "error", "frozen"),
    [
        ([].remove, ValueError, False),  # "list.remove(x): x not in list"
        (functools.partial(operator.add, None), TypeError, True),  # "... 'NoneType' and ..."
    ],
    ids=["bound method of a list", "functools.partial of operator.add"],
)
def test_a_c_callback_s_error_passes_as_it_is_when_the_layer_calls_it_itself(
    callback, error, frozen
):
    """A callback with no code of its own runs in no frame: a layer calling it itself had its
    ValueError relabelled "FiresDirectly 'scale': backward: list.remove(x): x not in list", a
    LayerError, and its TypeError mentioning None blamed on the layer's frozen bias."""
    layer = FiresDirectly(4, name="scale")
    layer.b.set_static(frozen)
    layer.forward(Arg(np.ones((5, 4))))
    layer.output.grad = np.ones((5, 4))
    with pytest.raises(error) as e:
        layer.backward(callback)
    assert not isinstance(e.value, LayerError), e.value


class Inverts(Layer):
    """Multiplies by the inverse of its input's Gram matrix: singular for rows of ones."""

    def _forward(self, x):
        return x.value @ np.linalg.inv(x.value.T @ x.value)


def test_a_value_error_subclass_raised_in_a_layer_is_still_caught_by_its_class():
    """numpy's LinAlgError, a ValueError, came out as a LayerError naming the layer, the
    original chained: ``except np.linalg.LinAlgError`` around forward caught nothing."""
    layer = Inverts(name="inv")
    with pytest.raises(np.linalg.LinAlgError, match=r"^Inverts 'inv': Singular matrix$") as e:
        layer.forward(Arg(np.ones((4, 3))))
    assert isinstance(e.value, LayerError) and type(e.value.__cause__) is np.linalg.LinAlgError
    again = pickle.loads(pickle.dumps(e.value))  # a subprocess's error comes back so
    assert isinstance(again, np.linalg.LinAlgError) and isinstance(again, LayerError)
    assert str(again) == str(e.value)


@pytest.mark.parametrize(
    "use",
    [
        lambda layer: layer.forward(Arg(np.ones((2, 3)))),
        lambda layer: layer.backward(print),
        lambda layer: layer.parameters(),
        lambda layer: layer.settings(),
    ],
    ids=["forward", "backward", "parameters", "settings"],
)
def test_a_dataclass_layer_that_skips_the_base_s_init_is_told_so_when_run_by_hand(use):
    """Added to a Network it was told "Widths was made without calling super().__init__";
    run by hand it failed far away, "'Widths' object has no attribute 'name'" ('_params',
    'act'), the skipped base never named."""
    with pytest.raises(TypeError, match=r"^Widths was made without calling super\(\).__init__"):
        use(Widths())


class CountsOwn(Layer):
    """Takes integer labels and a bool mask as values (its own choice), and keeps buffers of
    its own of their dtypes, which it writes floats into: its own mistake, not a feed's."""

    num_inputs = 3

    def __init__(self, buffer: str) -> None:
        super().__init__()
        self.buffer = buffer
        self.seen = np.zeros(3, np.int64)
        self.keep = np.ones(3, bool)

    def _forward(self, x, labels, mask):
        if self.buffer == "int64 +=":
            self.seen += x.value.sum(0)  # numpy: "... output from float64 to int64"
        elif self.buffer == "bool out= after two-byte letters":  # the columns count bytes
            self.größe = np.multiply(self.keep, 0.5, out=self.keep)
        else:
            np.multiply(self.keep, 0.5, out=self.keep)  # "... output ... to dtype('bool')"
        return x.value * mask.value + labels.value


@pytest.mark.parametrize("buffer", ["int64 +=", "bool out= after two-byte letters", "bool out="])
def test_a_layer_s_own_buffer_of_a_feed_s_dtype_is_not_blamed_on_that_feed(buffer):
    """The feed blamed was the one of the dtype numpy refused: a layer writing floats into an
    int64 or bool buffer of its own was told "input 'labels' holds int64 values" ('mask',
    bool), feeds numpy never refused, the layer's own line left as the cause."""
    net = Network()
    net.add("counts", CountsOwn(buffer), inputs=["x", "labels", "mask"])
    feeds = {
        "x": Arg(np.ones((4, 3))),
        "labels": Arg(np.ones((4, 3), np.int64)),
        "mask": Arg(np.ones((4, 3), bool)),
    }
    with pytest.raises(TypeError, match=r"^Cannot cast ufunc '(add|multiply)' output") as e:
        net.forward(feeds)
    assert type(e.value) is not NetworkError, e.value


def test_a_dataclass_layer_that_skips_the_base_s_init_can_still_be_probed():
    """Its clear TypeError came out of ``hasattr(layer, "name")`` and ``getattr(layer, "output",
    None)`` too, which copy, IPython and a test's repr use to probe a value: they raised
    instead of answering False or the default. Used, it is still told so, as a TypeError."""
    layer = Widths()
    assert not hasattr(layer, "name")
    assert getattr(layer, "output", "absent") == "absent"
    assert repr(copy.deepcopy(layer)) == repr(pickle.loads(pickle.dumps(layer))) == repr(layer)
    with pytest.raises(AttributeError, match=r"^Widths was made without calling") as e:
        layer.forward(Arg(np.ones((2, 3))))
    assert isinstance(e.value, TypeError) and e.value.name == "name" and e.value.obj is layer


def _from_a_singular_covariance(shape, fan_in, fan_out, rng):
    """An initialiser of one's own drawing correlated weights: numpy's cholesky refuses a
    covariance that is not positive definite."""
    return np.linalg.cholesky(np.zeros((shape[0], shape[0]))) @ rng.standard_normal(shape)


class DrawsOwn(Layer):
    def __init__(self) -> None:
        super().__init__()
        self.w = self.make_weight(
            "w", (3, 2), init=_from_a_singular_covariance, fan_in=3, fan_out=2, dtype=np.float64
        )


def test_a_value_error_subclass_raised_in_one_s_own_initialiser_is_still_caught_by_its_class():
    """forward's LinAlgError came out of both classes; one raised while drawing a weight was a
    plain LayerError "DrawsOwn: w: Matrix is not positive definite", ``except LinAlgError``
    around the layer's construction caught nothing."""
    with pytest.raises(np.linalg.LinAlgError, match=r"^DrawsOwn: w: Matrix is not positive") as e:
        DrawsOwn()
    assert isinstance(e.value, LayerError) and type(e.value.__cause__) is np.linalg.LinAlgError


def _widths_of(x):
    """A check of one's own, as a researcher's layer runs it through ``checked``."""
    if x.shape[1] % 2:
        raise ValueError(f"an even width is needed, got {x.shape[1]}")
    return x.shape[1] // 2


class Halves(Layer):
    def _forward(self, x):
        half = checked(self, _widths_of, x.value)
        return x.value[:, :half] + x.value[:, half:]


def test_checked_keeps_the_traceback_of_a_function_of_one_s_own():
    """``checked`` re-raised "Halves: an even width is needed, got 3" from None: the line of
    one's own function that raised was shown nowhere. A kernel's stays left out."""
    with pytest.raises(LayerError, match=r"^Halves: an even width is needed, got 3$") as e:
        Halves().forward(Arg(np.ones((2, 3))))
    assert type(e.value.__cause__) is ValueError
    assert e.value.__cause__.__traceback__.tb_next.tb_frame.f_code is _widths_of.__code__
    with pytest.raises(LayerError, match="unknown activation") as e:
        Halves(act="relu6")
    assert e.value.__cause__ is None and e.value.__suppress_context__


class ReadsRows(Layer):
    """A sparse table of one's own whose rows_read refuses ids past its rows, its own check
    chained to numpy's."""

    def __init__(self) -> None:
        super().__init__()
        self.table = self.new_param("table", np.zeros((4, 2)))
        self.table.sparse_rows = True

    def rows_read(self, feeds):
        try:
            return [(self.table.name, np.take(np.arange(4), feeds[0].ids, mode="raise"))]
        except IndexError as exc:
            raise self.fail(f"ids past the table's 4 rows: {exc}") from exc


def test_rows_needed_keeps_the_layer_s_error_as_the_cause():
    """rows_needed re-raised the layer's LayerError as a NetworkError from None: the layer's
    error, and the error it chained (numpy's IndexError here), were lost."""
    net = Network()
    net.add("rows", ReadsRows(), inputs="words")
    with pytest.raises(NetworkError, match=r"^ReadsRows 'rows': ids past the table's") as e:
        net.rows_needed({"words": Arg(ids=np.array([1, 9]))})
    assert isinstance(e.value.__cause__, LayerError)
    assert isinstance(e.value.__cause__.__cause__, IndexError)


class ForgetsItsCache(Scale):
    """Its backward reads a cache of its own it never filled: its own None, not a frozen
    weight's gradient."""

    cache = None

    def _backward(self, dz, callback):
        self.w.grad += (dz * self.cache).sum(0)


class AddsThroughAlias(Scale):
    """Adds into its weight's gradient through a variable: None where the weight is frozen."""

    def _backward(self, dz, callback):
        g = self.w.grad
        g += dz.sum(0)


def test_a_none_of_the_layer_s_own_is_not_blamed_on_its_frozen_weight():
    """Any TypeError naming NoneType, in a layer with a frozen weight, was re-raised as
    "static parameter(s) ['ForgetsItsCache.b'] have no gradient": the layer's own None cache
    was the matter. A line adding into the frozen gradient is still told so."""
    layer = ForgetsItsCache(3)
    layer.b.set_static(True)
    layer.forward(Arg(np.ones((2, 3))))
    layer.output.grad = np.ones((2, 3))
    with pytest.raises(TypeError, match=r"^unsupported operand type\(s\) for \*: 'float' and 'No"):
        layer.backward(lambda p: None)
    layer.cache = np.ones(3)
    layer.w.set_static(True)
    with pytest.raises(LayerTypeError, match=r"\['ForgetsItsCache.w', 'ForgetsItsCache.b'\]"):
        layer.backward(lambda p: None)
    alias = AddsThroughAlias(3)  # the line names no gradient, but adds into a None
    alias.w.set_static(True)
    alias.forward(Arg(np.ones((2, 3))))
    alias.output.grad = np.ones((2, 3))
    with pytest.raises(LayerTypeError, match=r"\['AddsThroughAlias.w'\] have no gradient"):
        alias.backward(lambda p: None)


class Tally:
    """A record of one's own over a dict, with no ``__dict__``: its ``__getattr__`` raises
    KeyError for any name it does not hold, as a careless one does."""

    __slots__ = ("_fields",)

    def __init__(self, **fields):
        object.__setattr__(self, "_fields", fields)

    def __getattr__(self, name):
        return self._fields[name]

    def __setattr__(self, name, value):
        self._fields[name] = value


class Schedule:
    """Its ``dtype`` is computed, and fails before the schedule is set."""

    @property
    def dtype(self):
        raise RuntimeError("the schedule was never set")


class ReadsOwnObjects(Layer):
    """Holds objects of one's own near the line numpy refuses: asking them anything runs
    code of one's own."""

    num_inputs = 2

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how, self.tally = how, Tally(counts=np.zeros(3, np.int64))

    def _forward(self, x, mask):
        schedule = Schedule()
        if self.how == "in place":
            self.tally.counts += x.value.sum(0)  # its own int64 buffer
        else:
            np.subtract(mask.value, mask.value)  # the bool feed's: numpy refuses it
        return x.value * mask.value + (schedule is None)


@pytest.mark.parametrize("how", ["in place", "bool feed"])
def test_reading_the_failing_line_runs_no_code_of_one_s_own(how):
    """Whose a casting error was ran the layer's own objects' code: Tally's __getattr__
    ("__dict__") raised KeyError, a local's dtype property its RuntimeError, either one
    coming out of forward in place of numpy's error or the feed's."""
    net = Network()
    net.add("own", ReadsOwnObjects(how), inputs=["x", "mask"])
    feeds = {"x": Arg(np.ones((4, 3))), "mask": Arg(np.ones((4, 3), bool))}
    error, match = (
        (TypeError, r"^Cannot cast ufunc 'add' output")
        if how == "in place"
        else (NetworkError, r"input 'mask' holds bool values")
    )
    with pytest.raises(error, match=match):
        net.forward(feeds)


class WidthsParamsFirst(Widths):
    """A subclass of a dataclass layer, with an ``__init__`` of its own that makes its weight
    before calling the base."""

    def __init__(self, n: int) -> None:
        self.w = self.new_param("w", np.ones(n))
        super().__init__()


def test_a_subclass_of_a_dataclass_layer_that_reads_before_the_base_is_told_as_any():
    """Its own ``__init__`` read ``name`` before the base's: the dataclass's message,
    raised as an AttributeError, was caught by that ``__init__``'s check and nested in its
    own, "WidthsParamsFirst.__init__ failed (WidthsParamsFirst was made without calling
    super().__init__(...) ...; a dataclass calls it in __post_init__) before calling
    super().__init__(...) ...": the call told twice, and __post_init__, which this class
    has none of. It is told as any layer that reads before the base (ParamsFirst)."""
    with pytest.raises(TypeError, match=r"^WidthsParamsFirst.__init__ failed \(.*'name'\)") as e:
        WidthsParamsFirst(3)
    assert "__post_init__" not in str(e.value) and str(e.value).count("super()") == 1
