"""The JSON text of what JSON has no form for (:mod:`distconv.plain_json`), shared by the job
check, the recorded sync scheme and the layers' settings."""

from __future__ import annotations

import ast
import dataclasses
import json
import threading
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from distconv import plain_cells, plain_json, plain_names, plain_sparse, plain_state
from distconv.layers import settings


def test_the_layers_take_an_address_out_with_the_one_pattern_of_a_module_below_both():
    """layers/settings.py kept a copy of the address pattern, as the layers must not import
    distconv.sync where it lived: two copies to keep alike. The shared module imports nothing
    of distconv, so any tier may import it."""
    assert settings.ADDRESS is plain_json.ADDRESS
    lock = threading.Lock()
    assert settings.setting_value(lock) == plain_json.plain(lock) == "lock"  # not its state
    imported = ["distconv.plain_names", "distconv.plain_sparse", "distconv.plain_state"]
    assert _distconv_imports(plain_json.__file__) == imported
    # the parts import nothing of distconv but one another: the sibling-closure rule's reading
    # of code (plain_cells) is plain_names' alone
    assert _distconv_imports(plain_names.__file__) == ["distconv.plain_cells"]
    for part in (plain_cells, plain_sparse, plain_state):
        assert not _distconv_imports(part.__file__)


def _distconv_imports(path: str) -> list[str]:
    """The modules of distconv the file at ``path`` imports."""
    tree = ast.parse(Path(path).read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    return [m for m in imported if m.split(".")[0] == "distconv"]


@dataclasses.dataclass(frozen=True, eq=False)
class _Spec:
    """A part's frozen spec of one's own, holding an array and a dict."""

    mask: np.ndarray
    scale: dict


def test_a_layer_setting_writes_an_array_as_the_job_check_does():
    """``setting_value`` wrote an array as its repr, summarised past 1000 elements: two ranks
    whose masks differ only in the middle agreed."""
    middle = np.zeros(5000)
    middle[2500] = 1
    ours = settings.setting_value(_Spec(np.zeros(5000), {}))
    theirs = settings.setting_value(_Spec(middle, {}))
    assert ours["mask"] == plain_json.plain(np.zeros(5000)) != theirs["mask"]


def test_a_layer_setting_names_a_dict_s_keys_as_the_job_check_does():
    """``setting_value`` wrote a dict's keys by ``str``: ``1`` and ``"1"`` merged, one value
    dropped; and ``None`` was ``"None"`` where the job check writes ``"null"``."""
    written = settings.setting_value(_Spec(np.zeros(1), {1: "a", "1": "b", None: "c"}))
    assert written["scale"] == {"1 (int)": "a", "1": "b", "null": "c"}


@dataclasses.dataclass(frozen=True, eq=False)
class _Skips:
    """A part's frozen spec of one's own holding a set, and a dict made read-only."""

    skip: frozenset
    table: MappingProxyType


def test_a_layer_setting_writes_a_set_and_a_mapping_as_the_job_check_does():
    """``setting_value`` wrote a frozenset (and a MappingProxyType holding a set) as its repr,
    in its rank's hash order (``frozenset({'fc', 'conv1', 'conv2'})`` under one PYTHONHASHSEED,
    ``frozenset({'conv1', 'conv2', 'fc'})`` under another): two ranks of one model refused."""
    spec = _Skips(frozenset({"fc", "conv1", "conv2"}), MappingProxyType({1: {"y", "x"}, "1": 0}))
    written = settings.setting_value(spec)
    assert written == {"skip": ["conv1", "conv2", "fc"], "table": {"1 (int)": ["x", "y"], "1": 0}}


def test_a_layer_setting_writes_a_torch_tensor_as_the_job_check_does():
    """``setting_value`` took only numpy's arrays by their values: a tensor (or a cupy array,
    on a GPU the layers' own) in a part's frozen spec was its repr, summarised past 1000
    elements, so two ranks whose masks differ only in the middle agreed."""
    torch = pytest.importorskip("torch")
    middle = torch.zeros(5000)
    middle[2500] = 1
    ours = settings.setting_value(_Spec(torch.zeros(5000), {}))
    theirs = settings.setting_value(_Spec(middle, {}))
    assert ours["mask"] == plain_json.plain(torch.zeros(5000)) != theirs["mask"]


class _Leaky:
    """An activation of one's own: an attribute, no str or repr of its own."""

    def __init__(self, slope: float):
        self.slope = slope

    def __call__(self, x):
        return x


def test_a_layer_setting_writes_an_object_without_a_text_by_its_attributes():
    """``setting_value`` wrote an object whose class has no repr of its own as that repr less
    its address, ``<tests.test_plain_json._Leaky object>``: two ranks whose parts' specs
    held ``_Leaky(0.1)`` and ``_Leaky(0.2)`` agreed on one model. It is written as the job
    check writes it: its class's name and its attributes."""
    ours = settings.setting_value(_Spec(np.zeros(1), {"act": _Leaky(0.1)}))
    theirs = settings.setting_value(_Spec(np.zeros(1), {"act": _Leaky(0.2)}))
    assert ours["scale"]["act"] == {"class": "_Leaky", "fields": {"slope": 0.1}}
    assert ours != theirs


def test_a_layer_setting_dataclass_leaves_out_its_repr_false_fields():
    """A layer's dataclass setting was written with every field, a ``repr=False`` one too,
    which the job check leaves out as the process's own (a pid, a log path): ranks of one
    model that agree refused each other at setup."""
    import dataclasses

    from distconv.layers.settings import setting_value

    @dataclasses.dataclass(frozen=True)
    class Spec:
        width: int
        pid: int = dataclasses.field(default=0, repr=False)

    assert setting_value(Spec(3, pid=1)) == setting_value(Spec(3, pid=2)) == {"width": 3}
    assert setting_value(Spec(3)) != setting_value(Spec(4))


def test_a_layer_setting_dataclass_leaves_out_an_init_false_field_never_set():
    """``setting_value`` read every shown field with getattr: one declared ``init=False`` and
    never set raised AttributeError, where the job check leaves it out."""
    import dataclasses

    from distconv.layers.settings import setting_value

    @dataclasses.dataclass
    class Spec:
        width: int
        cache: int = dataclasses.field(init=False)

    assert setting_value(Spec(3)) == {"width": 3}


class _Gate:
    """An object whose bound method a part's spec holds."""

    def __init__(self, keep: float):
        self.keep = keep

    def apply(self, x):
        return x


def _scaled(factor: float):
    def scale(x):
        return factor * x

    return scale


def test_a_layer_setting_writes_a_function_as_the_job_check_does():
    """``setting_value`` wrote a function or a bound method as its module and qualified name:
    two lambdas made in a loop (other defaults), two closures of one factory, two objects'
    bound methods and ``",".join`` beside ``";".join`` each agreed, so two ranks whose parts'
    specs held each agreed on one model, where the job check told them apart. It is written
    as the job check writes it (one reading); a class still by where it is defined."""
    pairs = [
        [lambda x, k=k: x * k for k in (1, 2)],
        [_scaled(1.0), _scaled(2.0)],
        [_Gate(0.1).apply, _Gate(0.9).apply],
        [",".join, ";".join],
    ]
    for one, other in pairs:
        ours = settings.setting_value(_Spec(np.zeros(1), {"f": one}))["scale"]["f"]
        assert ours == json.loads(plain_json.dumps(one)) != json.loads(plain_json.dumps(other))
        assert ours != settings.setting_value(_Spec(np.zeros(1), {"f": other}))["scale"]["f"]
    assert settings.setting_value(_scaled) == "<function tests.test_plain_json._scaled>"
    assert settings.setting_value(np.float32) == "numpy.float32"
    assert settings.setting_value(plain_json) == "<module 'distconv.plain_json'>"  # no path
