"""Whose a layer's error is, read from the source of the line that raised it
(``layers/source_spans.py``): the reading must never raise an error of its own in place of
the layer's, nor drop the frozen weight's advice where the line does add into its gradient."""

import ast
import importlib
import importlib.abc
import importlib.util
import linecache
import sys
import traceback
import zipfile
from types import SimpleNamespace, TracebackType

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers.base import Layer, LayerTypeError
from distconv.layers.source_spans import failing_span
from distconv.network import NetworkError
from tests.layers.blame_checks import assert_casting_error_comes_out, frozen_bias_run_forward
from tests.layers.researcher_layers import Scale


def _layer_from(tmp_path, name, body):
    """A Scale whose ``_backward`` is ``body``, imported from a file of its own: its lines are
    read as a researcher's are (exec'd code has none)."""
    path = tmp_path / f"{name}.py"
    path.write_text(
        "from tests.layers.researcher_layers import Scale\n\n\n"
        f"class Own(Scale):\n    cache = None\n\n    def _backward(self, dz, callback):\n{body}"
    )
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozen_bias_run_forward(module.Own(3))


def _with_little_stack(call, frames_left=150):
    """``call()`` run where ``frames_left`` frames remain below the recursion limit, as a
    Trainer's or a notebook's deep stack leaves: Python builds a line's syntax tree within it."""
    depth = sys.getrecursionlimit() - len(traceback.extract_stack()) - frames_left

    def nested(n):
        return nested(n - 1) if n else call()

    return nested(depth)


def test_a_long_line_s_error_is_the_layer_s_not_a_recursion_error(tmp_path):
    """A generated line of 2000 terms compiled at import, but the syntax tree of its failing
    span, built deeper in the stack, raised "RecursionError: maximum recursion depth exceeded
    during ast construction" out of backward, in place of the layer's TypeError."""
    terms = " + ".join(["dz"] * 2000)
    layer = _layer_from(tmp_path, "long_line", f"        self.w.grad += {terms} + self.cache\n")
    try:
        _with_little_stack(lambda: layer.backward(lambda p: None))
    except RecursionError as exc:
        raise AssertionError("the line's reading raised its own error") from exc
    except TypeError as exc:
        assert "NoneType" in str(exc)
    else:
        raise AssertionError("backward did not fail")


def test_where_the_layer_s_line_cannot_be_read_its_own_error_stands():
    """A layer exec'd (a notebook's cell run so, code generated) has no lines to read: the
    frozen weight was blamed all the same, and so was a None of the layer's own (its cache)
    where nothing said the line touched a gradient. Unread, the error is the layer's."""
    source = (
        "from tests.layers.researcher_layers import Scale\n"
        "class Own(Scale):\n"
        "    cache = None\n"
        "    def _backward(self, dz, callback):\n"
        "        self.b.grad[...] += self.cache[0]\n"
    )
    names = {}
    exec(compile(source, "<a cell of one's own>", "exec"), names)
    layer = frozen_bias_run_forward(names["Own"](3))
    with pytest.raises(TypeError, match="not subscriptable") as e:
        layer.backward(lambda p: None)
    assert not isinstance(e.value, LayerTypeError), e.value


class ReachesItsBias(Scale):
    """Adds into its bias's gradient through a way of one's own to reach the bias."""

    def __init__(self, how: str) -> None:
        super().__init__(3)
        self.how = how

    @property
    def bias(self):
        return self.b

    def _backward(self, dz, callback):
        if self.how == "a property":
            self.bias.grad += dz.sum(0)
        elif self.how == "an item of _params":
            self._params["b"].grad += dz.sum(0)
        elif self.how == "an item of parameters()":
            self.parameters()[1].grad += dz.sum(0)
        elif self.how == "a dict of grads":
            grads = {key: p.grad for key, p in self._params.items()}
            grads["b"] += dz.sum(0)
        elif self.how == "a list of grads, by a variable":
            grads, last = [p.grad for p in self.parameters()], len(self.parameters()) - 1
            grads[last] += dz.sum(0)
        else:
            grads = [p.grad for p in self.parameters()]
            grads[-1] += dz.sum(0)


@pytest.mark.parametrize(
    "how",
    [
        "a property",
        "an item of _params",
        "an item of parameters()",
        "a list of grads",
        "a dict of grads",
        "a list of grads, by a variable",
    ],
)
def test_a_frozen_weight_reached_in_a_way_of_one_s_own_is_still_named(how):
    """The advice was given only where the bias's owner was read from a variable or an
    object's __dict__: reached through a property (``self.bias.grad += ...``), a dict's or a
    call's item, or a list of gradients, the line was taken for touching no frozen gradient
    and "unsupported operand type(s) for +: 'NoneType' and 'float'" came out bare."""
    layer = frozen_bias_run_forward(ReachesItsBias(how))
    with pytest.raises(LayerTypeError, match=r"\['ReachesItsBias.b'\] have no gradient"):
        layer.backward(lambda p: None)


class Batches(list):
    """A list of one's own that loads (here: refuses) as it is iterated."""

    def __iter__(self):
        raise RuntimeError("iterated: the batches were consumed")


class HoldsBatches(Layer):
    num_inputs = 2

    def _forward(self, x, mask):
        pending = Batches([x.value])  # noqa: F841  (a local the error's reading comes upon)
        np.subtract(mask.value, mask.value)  # the bool feed's: numpy refuses it
        return x.value


def test_reading_a_forward_s_variables_runs_no_iteration_of_one_s_own():
    """The arrays a failing forward held were read by iterating each list among its
    variables: a list subclass's own ``__iter__`` ran, and its RuntimeError came out of
    forward in place of "input 'mask' holds bool values"."""
    net = Network()
    net.add("own", HoldsBatches(), inputs=["x", "mask"])
    with pytest.raises(NetworkError, match=r"input 'mask' holds bool values"):
        net.forward({"x": Arg(np.ones((4, 3))), "mask": Arg(np.ones((4, 3), bool))})


class Lazy:
    """A stand-in of one's own that loads what it stands for when its ``__dict__`` is asked,
    as lazy proxies do (``lazy_object_proxy``): here, it cannot."""

    @property
    def __dict__(self):
        raise RuntimeError("loaded: the table's file is gone")


class CountsInLazy(Layer):
    num_inputs = 2

    def __init__(self) -> None:
        super().__init__()
        self.tally = Lazy()
        self.tally.seen = np.zeros(3, np.int64)  # kept in its own dict, as any attribute

    def _forward(self, x, labels):
        self.tally.seen += x.value.sum(0)  # numpy: "... output from float64 to int64"
        return x.value + labels.value


def test_reading_a_written_attribute_runs_no_dict_of_one_s_own():
    """Whose int64 buffer a write refused was read by ``object.__getattribute__(owner,
    "__dict__")``, which runs a ``__dict__`` property of one's own (a lazy proxy's): its
    RuntimeError came out of forward in place of numpy's casting error."""
    assert_casting_error_comes_out(CountsInLazy())


class AddsIntoBias(Scale):
    def _backward(self, dz, callback):
        self.b.grad += dz.sum(0)


class SubtractsBools(Layer):
    num_inputs = 2

    def _forward(self, x, mask):
        np.subtract(mask.value, mask.value)  # numpy: "boolean subtract ... not supported"
        return x.value


def _failing_backward():
    layer = frozen_bias_run_forward(AddsIntoBias(3))
    return lambda: layer.backward(lambda p: None)


def _failing_forward():
    net = Network()
    net.add("own", SubtractsBools(), inputs=["x", "mask"])
    feeds = {"x": Arg(np.ones((4, 3))), "mask": Arg(np.ones((4, 3), bool))}
    return lambda: net.forward(feeds)


@pytest.mark.parametrize("make", [_failing_backward, _failing_forward], ids=["back", "forth"])
def test_a_layer_failing_near_the_recursion_limit_keeps_its_error(make):
    """Whose error it was is read in a few frames more than the layer used (its line's
    tokens, numpy's dtype names, a chain of attributes): a layer failing within them of the
    recursion limit (a recursive network, a deep notebook) had "RecursionError: maximum
    recursion depth exceeded" come out in place of its own TypeError."""
    for frames_left in range(1, 40):
        linecache.clearcache()  # its lines read again: the most frames
        call = make()
        try:
            _with_little_stack(call, frames_left)
        except RecursionError as exc:  # the layer's own where nothing failed before
            assert not isinstance(exc.__context__, TypeError), frames_left
        except (TypeError, NetworkError):  # the layer's, or the feed named
            pass


class AddsIntoItsAlias(Scale):
    """Adds into its bias's gradient through a variable, by items."""

    def _backward(self, dz, callback):
        g = self.b.grad
        g[...] += dz.sum(0)


class ReadsItsCache(Scale):
    """Reads an item of a cache of its own, left None."""

    def _backward(self, dz, callback):
        c = self.cache
        self.w.grad += c[0] * dz.sum(0)


def _backward_of(layer):
    layer.b.set_static(True)
    layer.cache = None
    layer.forward(Arg(np.ones((2, 3))))
    layer.output.grad = np.ones((2, 3))
    layer.backward(lambda p: None)


def test_adding_into_an_alias_s_items_names_the_frozen_weight():
    """``g = self.b.grad; g[...] += s`` fails reading ``g[...]`` ("'NoneType' object is not
    subscriptable"), a span that alone writes nothing: the frozen bias was named nowhere."""
    with pytest.raises(LayerTypeError, match=r"\['AddsIntoItsAlias.b'\] have no gradient"):
        _backward_of(AddsIntoItsAlias(3))


def test_reading_an_item_of_a_none_of_one_s_own_is_not_blamed_on_the_frozen_weight():
    with pytest.raises(TypeError, match="not subscriptable") as e:
        _backward_of(ReadsItsCache(3))
    assert not isinstance(e.value, LayerTypeError), e.value


def test_a_long_backward_s_line_is_read_without_reading_all_its_code(tmp_path):
    """``failing_span`` listed every instruction's position of the failing frame's code, each
    time a traceback frame was read: O(the code's size) where it needs the instruction's own
    and (for ``g[...] += s``) the few after it. Python 3.10 keeps no positions: its line's
    statement is read from the file parsed once (``line_statements``)."""
    body = "        g = self.b.grad\n        g[...] += dz.sum(axis=0)\n" + "        x = 1\n" * 5000
    layer = _layer_from(tmp_path, "long_backward", body)
    with pytest.raises(LayerTypeError) as e:
        layer.backward(lambda p: None)
    tb = e.value.__cause__.__traceback__
    while tb.tb_frame.f_code.co_name != "_backward":
        tb = tb.tb_next
    code, read = tb.tb_frame.f_code, []

    def positions():
        for p in code.co_positions():
            read.append(p)
            yield p

    columns = {"co_positions": positions} if hasattr(code, "co_positions") else {}
    named = {"co_filename": code.co_filename, "co_name": code.co_name}
    frame = SimpleNamespace(
        f_code=SimpleNamespace(**named, **columns), f_globals=tb.tb_frame.f_globals
    )
    entry = SimpleNamespace(tb_frame=frame, tb_lasti=tb.tb_lasti, tb_lineno=tb.tb_lineno)
    assert isinstance(failing_span(entry), ast.AugAssign)
    assert len(read) < tb.tb_lasti // 2 + 50, f"{len(read)} positions read"


class RethrowsWithItsOwnTraceback(Scale):
    """Re-raises its error with a traceback of its own making (a traceback cleaner's), whose
    instruction is -1: none."""

    def _backward(self, dz, callback):
        try:
            self.b.grad += dz.sum(0)
        except TypeError as exc:
            frame = sys._getframe()
            raise exc.with_traceback(TracebackType(None, frame, -1, frame.f_lineno)) from None


def test_a_traceback_made_by_hand_with_no_instruction_is_not_read():
    """Read lazily, ``failing_span`` sliced the positions from ``tb_lasti // 2``: a
    traceback's -1 (made by hand) had islice's ValueError ("Indices for islice() must be
    None or an integer") come out of backward in place of the layer's error. No line read
    says the bias's gradient was touched (its own line is not in that traceback): the
    layer's error stands, unblamed."""
    layer = frozen_bias_run_forward(RethrowsWithItsOwnTraceback(3))
    with pytest.raises(TypeError, match="NoneType") as e:
        layer.backward(lambda p: None)
    assert not isinstance(e.value, LayerTypeError), e.value


def test_a_layer_imported_from_a_zip_archive_is_read(tmp_path):
    """A layer imported from a zip archive (a zipapp, an egg) has no file linecache can open:
    its source is its loader's. Its line was taken for one nothing can read, and the frozen
    bias it adds into went unnamed; Python's own traceback shows that line."""
    archive = tmp_path / "layers.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(
            "zipped_layer.py",
            "from tests.layers.researcher_layers import Scale\n\n\n"
            "class Own(Scale):\n    def _backward(self, dz, callback):\n"
            "        self.w.grad += dz.sum(0)\n        self.b.grad += dz.sum(0)\n",
        )
    sys.path.insert(0, str(archive))
    try:
        module = importlib.import_module("zipped_layer")
    finally:
        sys.path.remove(str(archive))
        sys.modules.pop("zipped_layer", None)
    layer = frozen_bias_run_forward(module.Own(3))
    with pytest.raises(LayerTypeError, match=r"static parameter\(s\) \['Own.b'\] have no grad"):
        layer.backward(lambda p: None)


class _LoaderThatCannotGiveSource(importlib.abc.Loader):
    """Loads a layer from a string under a file name no disk holds, and raises where its
    source is asked for (an import hook of one's own)."""

    def __init__(self, path):
        self.path = path

    def exec_module(self, module):
        source = (
            "from tests.layers.researcher_layers import Scale\n\n\n"
            "class Own(Scale):\n    def _backward(self, dz, callback):\n"
            "        self.b.grad += dz.sum(0)\n"
        )
        exec(compile(source, self.path, "exec"), module.__dict__)

    def get_source(self, name):
        raise RuntimeError(f"no source kept for {name}")


def test_a_loader_that_cannot_give_the_source_leaves_the_layer_s_error(tmp_path):
    """Lines are read through the module's loader where no file holds them; a loader of one's
    own that raised there had its error come out of backward in place of the layer's."""
    loader = _LoaderThatCannotGiveSource(str(tmp_path / "gone" / "hooked_layer.py"))
    module = importlib.util.module_from_spec(
        importlib.util.spec_from_loader("hooked_layer", loader)
    )
    loader.exec_module(module)
    layer = frozen_bias_run_forward(module.Own(3))
    try:  # not pytest.raises: its report of the loader's error asks the loader again
        layer.backward(lambda p: None)
    except RuntimeError as exc:
        raise AssertionError(f"the loader's error came out: {exc}") from None
    except TypeError as exc:
        assert not isinstance(exc, LayerTypeError), exc
        assert "NoneType" in str(exc), exc
    else:
        raise AssertionError("backward did not fail")
