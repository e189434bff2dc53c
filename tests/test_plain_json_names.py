"""How :mod:`distconv.plain_json` writes a module, a function and a lambda: alike in every
process that holds the same one (whatever its install path or its address), another text for
another one of the same short name."""

from __future__ import annotations

import cmath
import collections
import functools
import importlib.util
import json
import math
import os
import random
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

from distconv import plain_json
from distconv.layers import settings
from tests.child_env import child_env, child_path

#: a config's module, as each rank's install holds it (another folder on each host or venv)
_CONFIG_MODULE = """\
def scale(x):
    return 2 * x


halve = lambda x: x / 2  # noqa: E731
third = lambda x: x / 3  # noqa: E731

import functools


def pick(x, keep):
    return x


class Mask:
    def __init__(self, keep):
        self.keep = keep

    def apply(self, x):
        return x


kept = functools.partial(pick, keep={"conv1", "conv2", "fc1", "fc2", "head"})
masked = Mask({"conv1", "conv2", "fc1", "fc2", "head"}).apply


def keeping(keep):
    def chosen(name):
        return name in keep

    return chosen


chosen = keeping(frozenset({"conv1", "conv2", "fc1", "fc2", "head"}))
scales = [lambda x, k=k: x * k for k in (2, 3)]
joins = [",".join, ";".join]
lookup = {"a": {"y", "x"}}.get
"""

#: what each process writes of it
_WRITE = """
import json_of_own
from distconv import plain_json
own = json_of_own
written = [own.scale, own.halve, own.kept, own.masked, own.chosen]
written += [own.scales, own.joins, own.lookup]
print(plain_json.dumps([own, *written]))
"""


@pytest.fixture(scope="module")
def installs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The text two processes write of one config module, each imported from another folder
    (two hosts' installs) under another ``PYTHONHASHSEED`` (as ``mpiexec`` starts each rank):
    one run each, shared by the checks below."""
    written = []
    for host, seed in (("host_a", "1"), ("host_b", "2")):
        folder = tmp_path_factory.mktemp(host)
        (folder / "json_of_own.py").write_text(_CONFIG_MODULE)
        written.append(
            subprocess.run(
                [sys.executable, "-c", _WRITE],
                capture_output=True,
                text=True,
                env=child_env(PYTHONPATH=child_path(folder), PYTHONHASHSEED=seed),
                timeout=50,
                check=True,
            ).stdout
        )
    return written


def test_a_module_is_written_by_its_name_not_its_install_path(installs: list[str]):
    """A module's text held its file's path (``<module 'x' from '/home/a/venv/...'>``): ranks
    on two hosts, or two venvs, that hold the same module disagreed."""
    ours, theirs = installs
    assert ours == theirs
    assert json.loads(ours)[0] == "<module 'json_of_own'>"
    assert plain_json.plain(subprocess) == "<module 'subprocess'>"  # no path in it
    assert str(Path(subprocess.__file__).parent) not in plain_json.dumps(subprocess)


def _module(folder: Path, name: str):
    """The config module :data:`_CONFIG_MODULE` imported from ``folder`` as ``name``, not
    left in ``sys.modules`` nor on ``sys.path``."""
    path = folder / f"{name}.py"
    path.write_text(_CONFIG_MODULE)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_function_is_written_by_its_module_and_qualified_name_a_lambda_by_its_line_too(
    installs: list[str], tmp_path: Path
):
    """A function was written by its text less its address, ``<function scale>``: two
    modules' ``scale`` (or two lambdas anywhere) agreed. Its module and qualified name tell
    two functions of one name apart; a lambda's (``<lambda>``, as a function's made in a
    call is ``make.<locals>.f``) names no one function of its module, so its first line
    follows. The same function is the same text in each process, whatever its folder."""
    ours, theirs = installs
    assert ours == theirs
    assert json.loads(ours)[1:3] == [
        "<function json_of_own.scale>",
        "<function json_of_own.<lambda> line 5>",
    ]
    one, other = _module(tmp_path, "config_one"), _module(tmp_path, "config_two")
    assert plain_json.plain(one.scale) != plain_json.plain(other.scale)
    assert plain_json.plain(one.halve) != plain_json.plain(other.halve)
    assert plain_json.plain(one.halve) != plain_json.plain(one.third)
    # imported here from a third folder, under this process's own PYTHONHASHSEED: as theirs
    here = _module(tmp_path, "json_of_own")
    assert [plain_json.plain(here.scale), plain_json.plain(here.halve)] == json.loads(ours)[1:3]


def test_a_built_in_function_is_written_by_its_module_and_qualified_name():
    """``math.sqrt`` and ``cmath.sqrt`` were both ``<built-in function sqrt>``: a config that
    chose one on a rank and the other on another passed the job check; a type's own
    (``dict.fromkeys``, ``OrderedDict.fromkeys``) was ``<built-in method fromkeys of type
    object>`` for each. One bound to an object is written by that object's type, as before."""
    assert plain_json.plain(math.sqrt) == "<built-in function math.sqrt>"
    assert plain_json.plain(cmath.sqrt) == "<built-in function cmath.sqrt>"
    assert plain_json.plain(len) == "<built-in function builtins.len>"
    assert plain_json.plain(dict.fromkeys) == "<built-in method builtins.dict.fromkeys>"
    ordered = plain_json.plain(collections.OrderedDict.fromkeys)
    assert ordered == "<built-in method collections.OrderedDict.fromkeys>"
    appended = {"func": "<built-in method builtins.list.append>", "self": [1]}
    assert plain_json.plain([1].append) == {
        "class": "builtin_function_or_method",
        "fields": appended,
    }


def test_a_built_in_method_bound_to_an_object_is_walked_as_a_bound_method_is(installs):
    """Its text named the object's type alone (``<built-in method join of str object>``):
    ``",".join`` and ``";".join``, or two tables' ``get``, agreed, and two ranks whose configs
    chose each passed the job check. Its object is walked as a bound method's ``self`` is,
    alike in each process (a set in one order)."""
    ours, theirs = installs
    assert ours == theirs  # each process under its own PYTHONHASHSEED
    joins = [j["fields"] for j in json.loads(ours)[7]]
    assert joins == [{"func": "<built-in method builtins.str.join>", "self": s} for s in ",;"]
    lookup = json.loads(ours)[8]["fields"]
    assert lookup == {"func": "<built-in method builtins.dict.get>", "self": {"a": ["x", "y"]}}
    assert plain_json.dumps({1: 2}.get) != plain_json.dumps({1: 3}.get)
    doubled = {"func": "<built-in method builtins.int.__mul__>", "self": 2}  # a method-wrapper
    assert json.loads(plain_json.dumps((2).__mul__))["fields"] == doubled
    assert plain_json.dumps((2).__mul__) != plain_json.dumps((3).__mul__)


def test_a_partial_and_a_bound_method_are_walked_not_written_by_their_repr(
    installs: list[str], tmp_path: Path
):
    """A ``functools.partial`` was written by its repr less addresses, its function without
    its module (``functools.partial(<function scale>, ...)``) and its arguments by their repr:
    a set in its process's hash order (ranks that agree disagreed), an array summarised (two
    that differ in the middle agreed); a bound method by its repr, its object's too. Each is
    walked: the function by its name, what it holds as it would be written alone."""
    ours, theirs = installs
    assert ours == theirs  # each process under its own PYTHONHASHSEED
    keep = ["conv1", "conv2", "fc1", "fc2", "head"]
    function = "<function json_of_own.{}>".format
    assert json.loads(ours)[3:5] == [
        {
            "class": "partial",
            "fields": {"func": function("pick"), "args": [], "keywords": {"keep": keep}},
        },
        {
            "class": "method",
            "fields": {
                "func": function("Mask.apply"),
                "self": {"class": "Mask", "fields": {"keep": keep}},
            },
        },
    ]
    one, other = _module(tmp_path, "config_one"), _module(tmp_path, "config_two")
    assert plain_json.dumps(functools.partial(one.scale)) != plain_json.dumps(
        functools.partial(other.scale)
    )
    middle = np.zeros(3000)
    changed = middle.copy()
    changed[1500] = 1.0
    assert plain_json.dumps(functools.partial(one.pick, middle)) != plain_json.dumps(
        functools.partial(one.pick, changed)
    )
    assert plain_json.dumps(one.Mask({1}).apply) != plain_json.dumps(one.Mask({2}).apply)


def _scaler(factor):
    def scale(x):
        return factor * x

    return scale


def _countdown():
    def down(n):  # its own cell holds it
        return n and down(n - 1)

    return down


def test_a_closure_is_written_with_the_values_it_captured(installs: list[str]):
    """Two closures of one factory over other values were one text (its name and first
    line): two ranks whose configs differ in a captured value passed the job check. Its cells
    are walked as a partial's arguments are, by name: the same text in each process (no
    address, a frozenset in one order), one that holds itself a back reference, not an endless
    walk."""
    ours, theirs = installs
    assert ours == theirs  # each process under its own PYTHONHASHSEED
    chosen = json.loads(ours)[5]
    assert chosen == {
        "class": "function",
        "fields": {
            "func": "<function json_of_own.keeping.<locals>.chosen line 28>",
            "closure": {"keep": ["conv1", "conv2", "fc1", "fc2", "head"]},
        },
    }
    assert plain_json.dumps(_scaler(2)) != plain_json.dumps(_scaler(3))
    assert plain_json.plain(_scaler(2)) != plain_json.plain(_scaler(3))
    assert plain_json.dumps(_scaler(np.zeros(3))) == plain_json.dumps(_scaler(np.zeros(3)))
    # an array's values change in place: its dtype and shape alone
    assert plain_json.dumps(_scaler(np.zeros(3))) != plain_json.dumps(_scaler(np.ones(4)))
    down = plain_json.plain(_countdown())
    assert down["fields"]["closure"] == {"down": {"class": "function", "fields": "..."}}
    assert plain_json.dumps(_countdown()) == plain_json.dumps(_countdown())


def test_a_function_is_written_with_its_default_arguments(installs: list[str]):
    """``lambda x, k=k: x * k`` made in a loop was one text for each ``k`` (its name and
    line): two ranks whose configs differ in a default passed the job check. Its defaults are
    written by their parameters' names, a keyword-only one's too, alike in each process."""
    ours, theirs = installs
    assert ours == theirs  # each process under its own PYTHONHASHSEED
    scales = json.loads(ours)[6]
    assert [s["fields"]["defaults"] for s in scales] == [{"k": 2}, {"k": 3}]
    assert scales[0]["fields"]["func"] == scales[1]["fields"]["func"]

    def pick(x, keep=frozenset({"conv1", "fc1"}), *rest, scale=1.0, **more):
        return x

    assert plain_json.plain(pick)["fields"]["defaults"] == {
        "keep": ["conv1", "fc1"],
        "scale": 1.0,
    }
    assert plain_json.dumps(lambda x, *, k=1: x) != plain_json.dumps(lambda x, *, k=2: x)
    assert plain_json.plain(_scaler(2))["fields"].keys() == {"func", "closure"}  # no defaults


def _memo(x, _cache={}):  # noqa: B006 (the idiom itself)
    return _cache.setdefault(x, x)


def _counting():
    _seen = set()

    def count(x):
        _seen.add(x)
        return len(_seen)

    return count


class _Method:
    def describe(self):
        return super().__repr__()  # a __class__ cell


def test_a_private_default_or_cell_is_left_out_as_a_private_attribute_is():
    """A memo in a default (``_cache={}``) or a cell (``_seen``) is what the process filled in,
    as an object's private attribute is: written, ranks that agree refused each other once one
    had called it. A method using ``super()`` (its ``__class__`` cell) is its name alone."""
    before = plain_json.dumps(_memo)
    _memo(1)
    assert plain_json.dumps(_memo) == before == '"<function tests.test_plain_json_names._memo>"'
    count = _counting()
    before = plain_json.dumps(count)
    count("conv1")
    assert plain_json.dumps(count) == before
    assert plain_json.plain(_Method.describe) == (
        "<function tests.test_plain_json_names._Method.describe>"
    )


@functools.cache
def _cached_sqrt(x):
    return math.sqrt(x)


@functools.cache
def _cached_log(x):
    return math.log(x)


def test_a_cached_function_is_written_by_the_function_it_wraps():
    """``functools.cache``'s wrapper has no text of its own: it was written by its cache's
    settings alone, so two cached functions (``_cached_sqrt``, ``_cached_log``) agreed and two
    ranks whose configs chose each passed the job check."""
    written = json.loads(plain_json.dumps(_cached_sqrt))["fields"]
    assert written["func"] == "<function tests.test_plain_json_names._cached_sqrt>"
    assert plain_json.dumps(_cached_sqrt) != plain_json.dumps(_cached_log)
    assert plain_json.dumps(functools.lru_cache(8)(math.sqrt)) != plain_json.dumps(
        functools.lru_cache(8)(cmath.sqrt)
    )
    _cached_sqrt(4.0)  # what it cached is not written
    assert json.loads(plain_json.dumps(_cached_sqrt))["fields"] == written


def test_the_random_modules_functions_are_written_alike_whatever_was_drawn():
    """``random.gauss`` and ``random.random`` are bound to the module's ``Random``, walked as a
    bound method's object: its ``gauss_next``, set by every other ``random.gauss`` call, was
    written, so ranks whose configs name them refused each other once one had drawn an odd
    number of them. A ``Random`` is its process's state, written by its type's name."""
    chosen = [random.random, random.gauss, random.Random(3).random]
    before = plain_json.dumps(chosen)
    state = random.getstate()  # the module's draws put back: other tests share it
    try:
        random.gauss(0.0, 1.0)
        assert plain_json.dumps(chosen) == before
    finally:
        random.setstate(state)
    assert json.loads(before)[0]["fields"]["self"] == "Random"


class _Trainer:
    """An object holding its own method (a callback) and a partial of it."""

    def __init__(self):
        self.lr = 0.1
        self.on_step = self.step
        self.later = functools.partial(self.step, 2)

    def step(self, n=1):
        return n


def test_an_object_holding_its_own_bound_method_is_written_once_not_walked_forever():
    """An object holding its own method (a callback: ``self.on_step = self.step``), or a
    partial of it, walks back to itself through the method's ``self``: written ``"..."``
    there, as an object's back reference is, not walked until Python's stack ran out."""
    written = json.loads(plain_json.dumps(_Trainer()))
    assert written["fields"]["lr"] == 0.1
    back = {"class": "_Trainer", "fields": "..."}
    assert written["fields"]["on_step"]["fields"]["self"] == back
    assert written["fields"]["later"]["fields"]["func"]["fields"]["self"] == back


def test_a_table_or_list_holding_its_own_built_in_method_is_written_not_refused():
    """A table holding its own ``get`` (a registry's fallback: ``table["default"] =
    table.get``), or a list its own ``append``, walked back to itself through the method's
    ``self``: refused as circular (json's ValueError), the config failed on every rank since
    a built-in method's object is walked. Its ``self`` there is ``"..."``."""
    table = {"scale": 2}
    table["default"] = table.get
    later = [1]
    later.append(functools.partial(later.append, 3))
    written = json.loads(plain_json.dumps([table, later]))
    assert written[0]["default"]["fields"] == {
        "func": "<built-in method builtins.dict.get>",
        "self": "...",
    }
    assert written[1][1]["fields"]["func"]["fields"]["self"] == "..."
    assert plain_json.dumps(table) != plain_json.dumps({"scale": 3, "default": table.get})
    looped = {}
    looped["self"] = looped  # a table holding itself is still refused, as json refuses it
    with pytest.raises(ValueError, match="Circular"):
        plain_json.dumps(looped)


class _Hooks:
    """An object keying its callbacks by its own methods."""

    def __init__(self):
        self.hooks = {self.start: "before", self.stop: "after"}

    def start(self):
        pass

    def stop(self):
        pass


def test_a_key_leading_back_to_its_dict_s_holder_is_a_back_reference_there():
    """A key JSON has no form for was walked afresh, apart from its dict's walk: a key that
    leads back to the dict's holder (a method of it, keying its callbacks) walked the holder
    again, its dict, that key, ... until TooDeep refused the config (its repr was its text
    before a method was walked). Walked within its dict's walk, the holder there is
    ``"..."``, as a back reference in a value is."""
    hooks = json.loads(plain_json.dumps(_Hooks()))["fields"]["hooks"]
    back = {"class": "_Hooks", "fields": "..."}
    start, stop = (f"<function {__name__}._Hooks.{n}>" for n in ("start", "stop"))
    assert {json.loads(key)["fields"]["func"]: value for key, value in hooks.items()} == {
        start: "before",
        stop: "after",
    }
    assert all(json.loads(key)["fields"]["self"] == back for key in hooks)
    assert plain_json.dumps(_Hooks()) == plain_json.dumps(_Hooks())


class _Options:
    """Options read through ``__getattr__`` from a dict of their own, as attribute-dict
    configs are: an unknown name is a KeyError, not an AttributeError."""

    __slots__ = ("rate", "decay", "extra")

    def __init__(self):
        self.rate = 0.1
        self.extra = {"decay": 0.5}  # decay, a slot, left unset

    def __getattr__(self, name):
        return self.extra[name]

    def apply(self, x):
        return x


class _AnyName:
    """An object that answers any name (a stub, a lazy proxy)."""

    __slots__ = ("size",)

    def __getattr__(self, name):
        return f"made up {name}"

    def run(self):
        pass


def test_an_object_s_attributes_are_read_without_its_getattr():
    """An object's attributes were read with ``getattr``: an unset slot fell to its class's
    ``__getattr__``, so a method of an object answering from its own dict (a KeyError) refused
    the config with a bare KeyError naming nothing, its repr its text before methods were
    walked; one answering any name had an unset slot written as what it made up. Each
    attribute is read as Python's own lookup finds it, an unset one left out."""
    written = json.loads(plain_json.dumps({"step": _Options().apply, "stub": _AnyName().run}))
    assert written["step"]["fields"]["self"] == {
        "class": "_Options",
        "fields": {"rate": 0.1, "extra": {"decay": 0.5}},
    }
    assert written["stub"]["fields"]["self"] == "_AnyName"  # no attribute set: its name


class _Settings:
    """Settings read through ``__getattr__`` from a dict of their own, with a text of their own."""

    def __init__(self, **given):
        self._given = given

    def __getattr__(self, name):
        return self._given[name]

    def __repr__(self):
        return f"_Settings({self._given})"

    def build(self):
        pass


def test_an_object_with_a_text_of_its_own_is_asked_for_no_array_s_attribute():
    """An object with a text of its own was asked for an array's attributes (``layout``,
    ``__dlpack__``, ``item``) before its text: one answering from a dict of its own raised
    a bare KeyError ('layout'), and a method of it did too once walked (its repr was its text
    before). A lookup that fails is a name it has not (plain_json.probe)."""
    written = json.loads(plain_json.dumps({"s": _Settings(lr=0.1), "m": _Settings(lr=0.1).build}))
    assert written["s"] == "_Settings({'lr': 0.1})"
    assert written["m"]["fields"]["self"] == written["s"]


class _Config:
    """A config with an ``item(key)`` method, answering other names from a dict of its own."""

    def __init__(self, **given):
        self._given = given

    def __getattr__(self, name):
        return self._given[name]

    def item(self, key):
        return self._given[key]

    def __repr__(self):
        return f"_Config({self._given})"


def test_an_object_with_an_array_s_method_name_is_asked_for_no_other_through_its_getattr():
    """Only an object whose type had an array's name (``item``, ``layout``) was asked for the
    others: one with an ``item(key)`` method had ``layout`` looked up through its
    ``__getattr__``, a bare KeyError ('layout') in the job check and savable_facts. A lookup
    that fails, with any error, is a name it has not."""
    written = json.loads(plain_json.dumps({"c": _Config(lr=0.1), "m": _Config(lr=0.1).item}))
    assert written["c"] == "_Config({'lr': 0.1})"
    assert written["m"]["fields"]["self"] == written["c"]


class _Wrapped:
    """A proxy of a tensor (a lazy wrapper's kind): a text of its own, the rest handed on."""

    def __init__(self, tensor):
        self._tensor = tensor

    def __getattr__(self, name):
        return getattr(self._tensor, name)

    def __repr__(self):
        return f"_Wrapped({self._tensor!r})"


def test_a_proxy_handing_on_a_tensor_s_attributes_is_written_as_the_tensor():
    """606c596a asked for an array's attributes only an object whose type had one: a proxy
    handing a tensor's on through ``__getattr__`` was written by its text, which summarises
    one of over 1000 values (two different tensors agreed in the job check) and a 0-d's number
    lost. It is asked as the tensor it hands on."""
    torch = pytest.importorskip("torch")
    ours, theirs = torch.zeros(5000), torch.zeros(5000)
    theirs[2500] = 1
    assert plain_json.plain(_Wrapped(ours)) == plain_json.plain(ours)
    assert plain_json.plain(_Wrapped(ours)) != plain_json.plain(_Wrapped(theirs))
    assert plain_json.plain(_Wrapped(torch.tensor(3.5))) == 3.5
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.tensor([1.0, 2.0]), (3,))
    assert plain_json.plain(_Wrapped(sparse)) == plain_json.plain(sparse)


class _Lazy:
    """A lazy proxy whose tensor cannot be loaded: ``__getattr__`` raises OSError."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __getattr__(self, name: str):
        raise OSError(f"cannot load {self.path}: no such file")

    def __repr__(self) -> str:
        return f"Lazy({self.path})"


def test_a_lazy_proxy_that_cannot_load_raises_its_error_not_its_text():
    """An error other than a mapping's KeyError in a lookup was taken for no attribute: a lazy
    proxy that could not load its tensor (a missing file, an out of memory) was written by its
    text on that rank, beside its peers' hash, and the job check named a mismatch in place of
    the cause."""
    with pytest.raises(OSError, match="cannot load weights.pt"):
        plain_json.plain(_Lazy("weights.pt"))


class _StateDictProxy(_Lazy):
    """A lazy proxy reading a state dict that lacks its key: ``__getattr__`` raises KeyError
    of that key, not of the attribute asked for."""

    def __getattr__(self, name: str):
        raise KeyError("enc.w")


def test_a_proxy_s_missing_state_dict_key_raises_not_its_text():
    """A KeyError was taken for no attribute whatever its key: a lazy proxy whose state dict
    lacked its entry was written by its text beside its peers' hash. Only a KeyError of the
    attribute's own name says the object has none."""
    with pytest.raises(KeyError, match="enc.w"):
        plain_json.plain(_StateDictProxy("weights.pt"))


def test_the_environment_is_written_by_its_type_not_each_ranks_variables(monkeypatch):
    """``os.environ`` (and the bound ``os.environ.get`` a config may choose a setting's reader
    by, its object walked) was written whole: each rank's own ``OMPI_COMM_WORLD_RANK``, host
    name and paths, so ranks that agree refused each other at the job check, and a layer's
    settings held them. It is its process's state, written by its type's name."""
    chosen = [os.environ.get, os.environ, {"env": os.environ}]
    before = plain_json.dumps(chosen)
    monkeypatch.setenv("DISTCONV_TEST_RANK_ONLY", "rank 1's own")
    after = plain_json.dumps(chosen)
    assert after == before and "DISTCONV_TEST_RANK_ONLY" not in after
    assert json.loads(before)[0]["fields"]["self"] == "_Environ"
    assert settings.setting_value({"read": os.environ, "get": os.environ.get}) == {
        "read": "_Environ",
        "get": json.loads(before)[0],
    }


def _compiled(module: str, qualname: str, default: int):
    """A stand-in of a function Cython compiled (its type's name, its text, the attributes a
    real one has: Cython 3's ``cython_function_or_method``), made without a compiler."""

    def scale(x, k=default):
        return x * k

    kind = type(
        "cython_function_or_method",
        (),
        {"__repr__": lambda self: f"<cyfunction {qualname} at {id(self):#x}>"},
    )
    made = kind()
    made.__module__, made.__qualname__, made.__name__ = module, qualname, qualname
    made.__code__, made.__defaults__, made.__kwdefaults__ = scale.__code__, (default,), None
    made.__closure__ = None
    return made


def test_a_compiled_function_is_written_by_its_module_and_its_defaults():
    """A Cython function's text less its address (``<cyfunction scale>``) named it alone: two
    modules' compiled ``scale``, or one's copies over other defaults, agreed, and two ranks
    whose configs chose each passed the job check (where a layer's settings told them apart).
    It is written by its module and qualified name, and its defaults, as a function is."""
    ours = _compiled("fast_a", "scale", 2)
    assert plain_json.plain(ours)["fields"] == {
        "func": "<cyfunction fast_a.scale>",
        "defaults": {"k": 2},
    }
    assert plain_json.dumps(ours) == plain_json.dumps(_compiled("fast_a", "scale", 2))
    assert plain_json.dumps(ours) != plain_json.dumps(_compiled("fast_b", "scale", 2))
    assert plain_json.dumps(ours) != plain_json.dumps(_compiled("fast_a", "scale", 3))
    assert settings.setting_value(ours) == json.loads(plain_json.dumps(ours))


@functools.singledispatch
def _describe(value):
    return "value"


@_describe.register
def _(value: int):
    return "int"


def test_a_single_dispatch_function_is_written_alike_whatever_it_was_called_with():
    """A ``functools.singledispatch`` function is a closure over its cache of the types it was
    called with (a ``WeakKeyDictionary``): walked, it was written with what that rank had
    called it on, so ranks that agree refused each other at the job check once one had. A weak
    table or set holds what the process keeps alive: written by its type's name. What it
    registered is still written."""
    before = plain_json.dumps(_describe)
    assert _describe(3) == "int"
    assert plain_json.dumps(_describe) == before
    assert '"builtins.int": "<function tests.test_plain_json_names._>"' in before
    weak = [weakref.WeakSet(), weakref.WeakKeyDictionary(), weakref.WeakValueDictionary()]
    assert json.loads(plain_json.dumps(weak)) == [type(w).__qualname__ for w in weak]
    assert settings.setting_value(weak) == [type(w).__qualname__ for w in weak]
