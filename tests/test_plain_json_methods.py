"""How :mod:`distconv.plain_json` writes what functions share and dispatch: a cell another
function rebinds, and a ``functools.singledispatchmethod``'s registry."""

from __future__ import annotations

import functools
import inspect
import json

from distconv import plain_json
from distconv.layers import settings


def _counter():
    """A reader and a writer of one cell: ``count`` rebinds ``calls``, ``read`` only reads it."""
    calls = 0

    def read():
        return calls

    def count():
        nonlocal calls
        calls += 1

    return read, count


def _rebound_after():
    """A reader whose cell its factory sets again after making it, before returning it."""
    scale = 1

    def read():
        return scale

    scale = 2
    return read


def _outer_counter():
    """A writer nested one level deeper than the reader of its cell."""
    total = 0

    def read():
        return total

    def adder():
        def add(n):
            nonlocal total
            total += n

        return add

    return read, adder()


def test_a_cell_a_sibling_rebinds_is_written_by_its_type_as_ones_own_rebinding_is():
    """A cell its own function rebinds (``nonlocal``) is written by its type (its value is the
    count of calls); one rebound by another function of the same factory was written by the
    value it held: a reader's text changed with each call of its writer, so ranks that agree
    refused each other once one had called it (a dry step on rank 0)."""
    read, count = _counter()
    before = plain_json.dumps(read)
    count()
    assert plain_json.dumps(read) == before
    assert json.loads(before)["fields"]["closure"] == {"calls": "<int>"}
    assert settings.setting_value(read) == json.loads(before)
    read, add = _outer_counter()
    before = plain_json.dumps(read)
    add(3)
    assert plain_json.dumps(read) == before
    assert json.loads(before)["fields"]["closure"] == {"total": "<int>"}


#: a factory as a notebook's cell (or a module reloaded) defines it, run twice: _counter's own
#: source, so the two cannot drift apart
_FACTORY = inspect.getsource(_counter)


def test_a_cells_rule_is_the_same_whichever_closure_of_a_factory_run_again_came_first():
    """The sibling rule is cached by code, and code objects compare equal by their text: a
    closure of a factory defined again (the same source run again) was written first, found
    no factory holding its code by identity, and the cache answered the same for the new
    factory's closures: its sibling's cell was written by value, in the process that had
    written an older closure first and by type in one that had not."""
    namespace: dict = {}
    exec(compile(_FACTORY, "<cell 1>", "exec"), namespace)
    older, _ = namespace["_counter"]()
    exec(compile(_FACTORY, "<cell 2>", "exec"), namespace)
    read, count = namespace["_counter"]()
    count()
    for made in (older, read):
        assert json.loads(plain_json.dumps(made))["fields"]["closure"] == {"calls": "<int>"}


def test_a_cell_its_factory_set_again_is_written_by_the_value_it_holds_now():
    """A factory's own assignment after making a closure is done once it returns: the closure
    computes with the value the cell holds now, and two over other values differ."""
    assert json.loads(plain_json.dumps(_rebound_after()))["fields"]["closure"] == {"scale": 2}


class _Scaler:
    """Dispatches on its input's type; a number scaled by ``factor``."""

    def __init__(self, factor: float):
        self.factor = factor

    @functools.singledispatchmethod
    def apply(self, x):
        return x

    @apply.register
    def _(self, x: float):
        return x * self.factor


class _ScalerOfInts(_Scaler):
    """One more implementation registered, for ints."""

    @functools.singledispatchmethod
    def apply(self, x):
        return x

    @apply.register
    def _(self, x: float):
        return x * self.factor

    @apply.register
    def _(self, x: int):
        return x * self.factor


def test_a_single_dispatch_method_is_written_by_its_registry_and_its_object():
    """A ``functools.singledispatch`` function is written by its registry; a
    ``singledispatchmethod`` as its object hands it out (a function holding the method and the
    object in its cells) was written by its cells' types alone (``"<singledispatchmethod>"``,
    ``"<_Scaler>"``): two configs whose methods register other implementations, or whose
    objects hold other settings, agreed in the job check. It is written as a bound method,
    its registry in place of its function's cells."""
    written = json.loads(plain_json.dumps(_Scaler(0.5).apply))["fields"]
    name = "tests.test_plain_json_methods._Scaler"
    assert written == {
        "func": f"<function {name}.apply>",
        "registry": {
            "builtins.object": f"<function {name}.apply>",
            "builtins.float": (f"<function {name}._>"),
        },
        "self": {"class": "_Scaler", "fields": {"factor": 0.5}},
    }
    assert plain_json.dumps(_Scaler(0.5).apply) == plain_json.dumps(_Scaler(0.5).apply)
    assert plain_json.dumps(_Scaler(0.5).apply) != plain_json.dumps(_Scaler(0.25).apply)
    ints = plain_json.dumps(_ScalerOfInts(0.5).apply)
    assert "builtins.int" in json.loads(ints)["fields"]["registry"]
    assert plain_json.dumps(_Scaler.apply) != plain_json.dumps(_ScalerOfInts.apply)  # unbound
    assert "self" not in json.loads(plain_json.dumps(_Scaler.apply))["fields"]
    assert settings.setting_value(_Scaler(0.5).apply) == {"class": "function", "fields": written}


def _times(method, times):
    """A wrapper of ``method`` (``functools.wraps``: it copies its ``register`` too)."""

    @functools.wraps(method)
    def wrapper(x):
        return method(x) * times

    return wrapper


def test_a_wrapper_of_a_single_dispatch_method_is_written_by_its_own_cells():
    """``functools.wraps`` copies a dispatch method's ``register`` onto its wrapper, which
    was then written as the method itself, with neither the object nor the wrapper's cells:
    wrappers over other objects, or over other factors of their own, agreed."""
    written = json.loads(plain_json.dumps(_times(_Scaler(0.5).apply, 3)))["fields"]["closure"]
    assert written["times"] == 3
    assert written["method"]["fields"]["self"] == {"class": "_Scaler", "fields": {"factor": 0.5}}
    ours = plain_json.dumps(_times(_Scaler(0.5).apply, 3))
    assert ours != plain_json.dumps(_times(_Scaler(0.5).apply, 5))
    assert ours != plain_json.dumps(_times(_Scaler(0.25).apply, 3))


def _stepped():
    """A generator factory that yields a reader, then sets the cell again when resumed."""
    scale = 1

    def read():
        return scale

    yield read
    scale = 2
    yield read


def _looped():
    """A generator factory that sets the cell at the top of a loop it yields in."""
    scale = 1

    def read():
        return scale

    for step in range(3):
        scale = step
        yield read


def _set_before_yield():
    """A generator factory that sets the cell again before its one yield, never after."""
    scale = 1

    def read():
        return scale

    scale = 2
    yield read


def _set_before_reader(scale):
    """A generator factory that sets the cell after its first yield, but before it makes the
    reader: the cell never changes once the reader exists."""
    yield None
    kept = scale

    def read():
        return kept

    yield read


def _set_on_other_branch(scale, hand_out):
    """A generator factory that sets the cell again only on the branch that never hands the
    reader out."""

    def read():
        return scale

    if hand_out:
        yield read
    else:
        yield None
        scale = 0


def _yields_before_making():
    """A generator factory that hands out the reader made in a loop's last turn before it
    sets the cell again in the next: a store that comes before the reader's making in the code
    and after it in time."""
    scale = 0
    read = None
    for step in range(3):
        if read is not None:
            yield read
        scale = step

        def read():
            return scale  # noqa: B023 (the cell as it is when read: the point here)


def test_a_cell_a_generator_factory_sets_anywhere_is_written_by_its_type():
    """A generator factory is not done once it hands out its closure: a reader it yields sees
    the cell change each time it is resumed past a store, so two ranks at other points of it
    wrote other values and were refused. Any cell it sets is written by its type, before or
    after its yields, on any branch: which store can come after a reader was handed out is its
    code's flow (a loop turning it round: ``_yields_before_making``), not its order."""
    for factory in (_stepped, _looped, _yields_before_making):
        steps = factory()
        read = next(steps)
        before = plain_json.dumps(read)
        next(steps)
        assert plain_json.dumps(read) == before
        assert json.loads(before)["fields"]["closure"] == {"scale": "<int>"}
    once = next(_set_before_yield())
    assert json.loads(plain_json.dumps(once))["fields"]["closure"] == {"scale": "<int>"}
    for made in (_set_before_reader, functools.partial(_set_on_other_branch, hand_out=True)):
        steps = made(1)
        reader = next(steps)
        reader = next(steps) if reader is None else reader
        written = json.loads(plain_json.dumps(reader))["fields"]["closure"]
        assert list(written.values()) == ["<int>"], written


def test_a_cell_a_generator_factory_only_reads_is_written_by_value():
    """A cell the generator never sets (its argument, read by the reader) is written by its
    value, as a function factory's: two ranks whose factories were given 1 and 2 differ."""

    def given(scale):
        def read():
            return scale

        yield read

    written = [json.loads(plain_json.dumps(next(given(v))))["fields"]["closure"] for v in (1, 2)]
    assert written == [{"scale": 1}, {"scale": 2}]
