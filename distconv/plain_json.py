"""JSON text of a value that may hold what JSON has no form for, the same in every process.

The job check compares such text across ranks (:func:`~distconv.sync.description.digest`),
and a run compares the scheme it records with the one its metrics log holds
(:func:`~distconv.sync.description.sync_scheme`); a layer's settings take an address out of
a part's text with :data:`ADDRESS` (:mod:`distconv.layers.settings`). Of distconv it imports
only :mod:`distconv.plain_names`, :mod:`distconv.plain_sparse` and
:mod:`distconv.plain_state`, which import none: the layers, which must not import
:mod:`distconv.sync`, share it.

``json.dumps(..., default=str)`` gave another text in each process for two kinds of value: a
set, whose order follows ``PYTHONHASHSEED`` (``mpiexec`` starts each rank with its own), and an
object whose text holds its address. So ranks that agree were refused at setup, and a resume
under a run's own scheme recorded it anew.
"""

from __future__ import annotations

import dataclasses
import fractions
import hashlib
import json
import numbers
import re
import sys
import types
from collections import Counter
from collections.abc import Mapping
from typing import Any

from distconv.plain_names import (
    attribute,
    call_fields,
    code_name,
    is_bound_builtin,
    public_attributes,
    type_name,
    unused_name,
)
from distconv.plain_sparse import coo_entries, field_bytes, on_host, torch_bytes
from distconv.plain_state import is_process_dict, is_process_state, state_name

#: an object's address in its text: another in each process
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)``, a value JSON has no form for written by :func:`plain`,
    each mapping's keys as :func:`keyed` writes them.

    Raises:
        TooDeep: a value nested deeper than Python's stack allows (a chain of some 300
            objects, each its next's holder), in one line, not a bare RecursionError.
    """
    try:
        return json.dumps(keyed(value), default=plain, **options)
    except TooDeep:
        raise
    except RecursionError:
        raise TooDeep(
            f"nests deeper than {sys.getrecursionlimit()} Python calls can walk"
        ) from None


class TooDeep(ValueError, RecursionError):
    """A value nested deeper than :func:`dumps` can walk: a ValueError, as a value that holds
    itself is (a config refused in one line), and a RecursionError, which the parameter
    server's hello takes as nested too deep."""


def keyed(value: Any) -> Any:
    """``value`` with each mapping as a dict (a ``MappingProxyType``, a Mapping class of one's
    own: json wrote those as their str, one with no text of its own as its class's name, two
    contents alike) and its keys (however deep, in lists and tuples too) as the text JSON
    writes them (``1``: ``"1"``, ``True``: ``"true"``), a key JSON has no form for (a tuple, an
    Enum member) as its JSON text (``["conv", 1]``; a string's without its quotes); a key that
    another key of its dict is written as too (``1`` beside ``"1"``) with its type's name:
    ``"1 (int)"``. So ``sort_keys`` sorts keys of mixed types, and a tuple key is no TypeError
    naming neither key nor rank: the job check's ``as_sent`` and ``digest`` raised those. A
    value that holds itself is json's ValueError, not a RecursionError; an object walked by
    :func:`fields_of` that holds itself has its fields there written ``"..."`` (as a
    dataclass's repr writes it), and a bound method of a table or list that holds it
    (``table["get"] = table.get``) its ``self`` there: refused as circular, such a config
    failed on every rank once its built-in methods were walked."""
    return _keyed(value, set())


#: the types JSON writes as they are (a subclass's, an Enum of str's, may be walked)
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _keyed(value: Any, inside: set[int]) -> Any:
    """:func:`keyed`; ``inside``: the ids of the containers ``value`` is in."""
    if type(value) in _LEAVES:  # most of a description: no fields_of to ask (its cost)
        return value
    if isinstance(value, (set, frozenset)):  # walked here: one ``inside`` (see _sorted)
        return _sorted(value, inside)
    if isinstance(value, Mapping) and (
        is_process_dict(value) or type(value) is not dict and is_process_state(value)
    ):
        return state_name(value)  # os.environ, sys.modules, vars(sys), a weak table: the rank's
    fields = None if isinstance(value, (Mapping, list, tuple)) else fields_of(value)
    if fields is None and not isinstance(value, (Mapping, list, tuple)):
        return value
    if id(value) in inside:
        if fields is not None:  # an object's back reference (a parent's child's parent)
            return {"class": type(value).__qualname__, "fields": "..."}
        raise ValueError("Circular reference detected")
    inside.add(id(value))
    if fields is not None:
        bound = isinstance(value, types.MethodType) or is_bound_builtin(value)
        owner = fields.get("self") if bound else None
        if isinstance(owner, (Mapping, list, tuple)) and id(owner) in inside:
            fields = {**fields, "self": "..."}  # a table holding its own get: not refused
    # loops, not comprehensions, and an object's fields walked here, not in a call of their
    # own: each is a Python frame a level (3.11), and a closure's level cost five (its
    # fields, its cells), so a chain of 200 composed functions was refused as too deep
    mapping = fields if fields is not None else value if isinstance(value, Mapping) else None
    if mapping is not None:  # a MappingProxyType, one's own too: walked, not its str
        named = key_names(mapping, inside)  # a key back to a holder: "..." there
        walked: Any = {}
        for key, item in mapping.items():
            walked[named[key]] = _keyed(item, inside)
    else:
        walked = []
        for item in value:
            walked.append(_keyed(item, inside))
    inside.discard(id(value))
    return walked if fields is None else {"class": type(value).__qualname__, "fields": walked}


def _sorted(elements: Any, inside: set[int]) -> list[Any]:
    """A set's elements walked with the ``inside`` of the set's holder, in the order of their
    text (sorted keys) then their type's name: :func:`plain` dumped each afresh, so a tree's
    node holding a set of children, each linking back to it, recursed until a RecursionError."""
    walked = [(_keyed(element, inside), type(element).__qualname__) for element in elements]
    texts = [json.dumps(w, default=plain, sort_keys=True) for w, _ in walked]
    order = sorted(range(len(walked)), key=lambda i: (texts[i], walked[i][1]))
    return [walked[i][0] for i in order]


def fields_of(value: Any) -> dict[str, Any] | None:
    """The fields an object is written by (:func:`keyed`: its qualified class name beside them), or
    None where it is written otherwise: a partial's, a bound method's and a closure's
    (:func:`~distconv.plain_names.call_fields`); a dataclass's fields its repr shows (``repr=True``;
    its repr summarised a large array, and wrote a set in its process's hash order); an object's
    public attributes (``__dict__``, ``__slots__``; a name not starting with ``_``) where its class
    has no str or repr of its own (its text was its class's name alone: ``Aug(p=0.1)`` and
    ``Aug(p=0.9)`` agreed), None for one that holds none (written as its class's name, as before)
    and for :func:`is_process_state` (its type's name). A private attribute is its process's own
    state (a prefetch thread, a cache): walked, ranks that agree were refused. An object with a text
    of its own is written as that text: its author chose what it shows."""
    if isinstance(value, type):
        return None
    if (called := call_fields(value)) is not None:  # a partial, a bound method: walked
        return called
    if dataclasses.is_dataclass(value):
        unset = object()  # a field with no default that __post_init__ never set
        fields = [f.name for f in dataclasses.fields(value) if f.repr]  # as its repr shows
        found = {name: attribute(value, name, unset) for name in fields}
        return {name: v for name, v in found.items() if v is not unset}
    cls = type(value)
    if cls.__str__ is not object.__str__ or cls.__repr__ is not object.__repr__:
        return None
    if is_process_state(value):
        return None
    return public_attributes(value) or None


def key_names(mapping: Any, inside: set[int] | None = None) -> dict[Any, str]:
    """Each key of ``mapping`` -> the text it is written as (:func:`keyed`'s rule): its
    :func:`key_text`, with its type's name where another key has that text too (``1`` beside
    ``"1"``: ``"1 (int)"``; the string keeps its text). The same whatever order the keys came
    in, and never one text for two keys: a pair the rule cannot tell apart (two types of one
    name, ``"1 (int)"`` beside ``1`` and ``"1"``) is told apart by :func:`_kept_apart`, not
    one value dropped without a word, nor a ValueError: raised on the one rank whose config
    held the pair, before the job check's exchange, it left the others waiting in it.
    ``inside``: as :func:`key_text` takes it."""
    texts = {key: key_text(key, inside) for key in mapping}
    shared = Counter(texts.values())
    named = {
        k: t if isinstance(k, str) or shared[t] == 1 else f"{t} ({type(k).__qualname__})"
        for k, t in texts.items()
    }
    if len(set(named.values())) < len(named):
        return _kept_apart(named, texts)
    return named


def _kept_apart(named: dict[Any, str], texts: dict[Any, str]) -> dict[Any, str]:
    """``named`` with a text several keys share kept by one: a string key keeps its own, each
    other key takes its type's module-qualified name (``1`` beside ``"1"`` and ``"1 (int)"``:
    ``"1 (builtins.int)"``), then a number where that is taken too (two NaN keys: ``"NaN
    (builtins.float)"``, ``"NaN (builtins.float) 2"``), in the order of those names, then
    the mapping's own; ``texts``: each key's :func:`key_text`."""
    count = Counter(named.values())
    kept = {k: t for k, t in named.items() if isinstance(k, str) or count[t] == 1}
    used = set(kept.values())
    left = [k for k in named if k not in kept]
    for key in sorted(left, key=lambda k: (named[k], type_name(k))):  # sorted is stable
        text = unused_name(f"{texts[key]} ({type_name(key)})", used)
        kept[key] = text
        used.add(text)
    return {key: kept[key] for key in named}


def key_text(key: Any, inside: set[int] | None = None) -> str:
    """A dict's key as JSON writes it, one JSON has no form for as its JSON text (see
    :func:`keyed`), walked within ``inside`` (the ids of what holds the dict: :func:`_keyed`'s):
    walked afresh, a key back to the dict's holder (an object's own method) never ended."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)  # null, true, 1, NaN: never quoted
    text = dumps(key) if inside is None else json.dumps(_keyed(key, inside), default=plain)
    return json.loads(text) if text.startswith('"') else text


def plain(value: Any) -> Any:
    """A value JSON has no form for, as ``json.dumps``'s ``default``: a numpy scalar as its number,
    a class as its qualified name (``np.float16``: ``float16``; a nested one as ``Outer.Codec``, as
    its instance is named), a dataclass, a partial, a bound method, a closure or an object with
    no text of its own as :func:`keyed` writes it (``{"class": "Aug", "fields": {"p": 0.1}}``: see
    :func:`fields_of`), a thread, a lock, an open file as its type's name
    (:func:`is_process_state`), one holding nothing as its class's name (its default str has its
    address), a numpy array as :func:`_array` writes it (its dtype, shape and a hash of its values),
    as a torch tensor or a cupy array is (read through the methods they have: neither is imported
    here), a sparse tensor by its content (:func:`_sparse`), a module or a function by its name
    (:func:`~distconv.plain_names.code_name`), a number JSON has no form for, no Real (a
    Decimal, a complex) or a Fraction (``lr_decay`` takes any Real), as its type's name and its
    str (``{"class": "Decimal", "text": "0.1"}``: by its str alone, it agreed with the string
    ``"0.1"``; an older checkpoint's text still resumes: :mod:`distconv.resume_facts`),
    anything else its str (a path, a dtype, an Enum member: as older checkpoints' facts and
    recorded schemes hold them, which a resume compares), an address in it taken out
    (``<unlocked _thread.lock object at 0x7f..>``); a set as a sorted
    list (its order follows ``PYTHONHASHSEED``), its elements in the order of their JSON
    text, then their type's name."""
    if isinstance(value, type):
        return value.__qualname__
    if is_process_state(value):
        return state_name(value)
    name = code_name(value)  # a module, a function: by name, not path or address
    if name is not None and call_fields(value) is None:  # a closure: and its cells (defaults)
        return name
    if isinstance(value, (set, frozenset)):
        # by the text each is written as: by str, 1 and "1" tied and kept their hash order
        return sorted(value, key=_written)
    if fields_of(value) is not None:  # a dataclass, an object of attributes and no text
        return keyed(value)
    if type(value).__str__ is object.__str__ and type(value).__repr__ is object.__repr__:
        return type(value).__qualname__
    # an array's attributes asked of the object (probe): a proxy of a tensor hands them on
    if _is_sparse(value):
        return _sparse(value)
    if is_array(value) and not _no_host_values(value):
        return _array(value)  # an error here (a GPU's out of memory) is no text: raised
    item = probe(value, "item")
    if callable(item) and _shape(value) == () and not _no_host_values(value):
        return item()  # a 0-d meta tensor has no value to give: its str, below
    text = ADDRESS.sub("", str(value))
    if isinstance(value, fractions.Fraction) or (
        isinstance(value, numbers.Number) and not isinstance(value, numbers.Real)
    ):
        return {"class": type(value).__qualname__, "text": text}  # Decimal("0.1") beside "0.1"
    return text


def is_array(value: Any) -> bool:
    """Whether ``value`` is an array of a dimension above 0, written as :func:`_array` writes
    it: numpy's, or another library's (one that speaks DLPack or lives on a GPU: a torch
    tensor, a cupy or jax array; their str is summarised too), known without importing it."""
    numpy = sys.modules.get("numpy")  # an array exists only once numpy is imported
    if numpy is not None and isinstance(value, numpy.ndarray):
        return value.shape != ()
    if probe(value, "__dlpack__") is None and probe(value, "__cuda_array_interface__") is None:
        return False
    shape = _shape(value)
    return probe(value, "dtype") is not None and isinstance(shape, tuple) and shape != ()


def _no_host_values(tensor: Any) -> bool:
    """Whether a torch tensor gives the host no values to hash as a dense one's (a sparse one:
    :func:`_sparse`; a meta, a quantized or a nested one: its str), asked first, not read and
    its error caught: a catch of RuntimeError took a GPU's out of memory too, one rank's str
    beside its peers' hash."""
    layout = probe(tensor, "layout")
    if layout is not None and str(layout) != "torch.strided":
        return True
    return any(
        probe(tensor, flag, False) is True for flag in ("is_meta", "is_quantized", "is_nested")
    )


def _is_sparse(value: Any) -> bool:
    """Whether ``value`` is a sparse torch tensor (COO, CSR, CSC, BSR, BSC) not on meta."""
    layout = str(probe(value, "layout", ""))
    return layout.startswith("torch.sparse_") and probe(value, "is_meta", False) is not True


def _sparse(tensor: Any) -> dict[str, Any]:
    """A sparse tensor as its dtype, layout, shape and the SHA-256 of its indices' and values'
    (:func:`_array`'s) in one order (:func:`~distconv.plain_sparse.coo_entries`): entries in
    another order, or one given twice (summed where torch sums its dtype), agree. Its str
    summarised one of over 1000 entries, so two that differ in the middle agreed."""
    indices, values = coo_entries(tensor)
    return {  # keys sorted as first_difference names them: the shape's before the hashes'
        "dtype": str(tensor.dtype),
        "layout": str(tensor.layout),
        "shape": [int(n) for n in tensor.shape],
        "sparse_indices_sha256": hashlib.sha256(_values(indices)).hexdigest(),
        "values_sha256": hashlib.sha256(_values(values)).hexdigest(),
    }


def _shape(value: Any) -> Any:
    """``value.shape``; None where it has none, or cannot say (a nested tensor's raises)."""
    return None if probe(value, "is_nested", False) is True else probe(value, "shape")


def _array(array: Any) -> dict[str, Any]:
    """An array as its dtype, its shape and a SHA-256 of its values: exact, of a bounded
    length, and the same in every process that holds the same. Its str summarised one of over
    1000 elements (``[0. 0. 0. ... 0. 0. 0.]``, ``tensor([0., 0., ...])``), so two that
    differ in the middle agreed."""
    digest = hashlib.sha256(_values(array)).hexdigest()
    # keys in the order a difference is named in (first_difference sorts them): the shape's
    # before the hash's, which differs with it
    shape = [int(n) for n in array.shape]
    return {"dtype": str(array.dtype), "shape": shape, "values_sha256": digest}


def _values(array: Any) -> bytes:
    """A numpy array's bytes (in C order, whatever its own); one of objects, its values' JSON
    text (its bytes are their addresses); a structured one's fields' bytes, field by field
    (not its padding). Another library's array is read on the host first
    (a torch tensor detached and ``.cpu()``, a cupy array ``.get()``), then as numpy's, or
    where numpy cannot take it (torch's bfloat16, float8, complex32) by its bytes
    (:func:`~distconv.plain_sparse.torch_bytes`), or else by its values' JSON text (``tolist``)."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not isinstance(array, numpy.ndarray):
        host = on_host(array)
        try:
            array = numpy.asarray(host)  # no numpy (None): by its text, below
        except (AttributeError, TypeError, ValueError, RuntimeError):
            if numpy is not None and (raw := torch_bytes(host)) is not None:
                return raw
            array = None
        if array is None or array.shape != tuple(host.shape) or array.dtype.hasobject:
            return dumps(host.tolist()).encode()  # not taken whole: no object around itself
    if array.dtype.hasobject:
        return dumps(array.tolist(), sort_keys=True).encode()
    return field_bytes(array)


def _written(element: Any) -> tuple[str, str]:
    """A set's element as it is written, then its type's name: an order every process shares."""
    return dumps(element, sort_keys=True), type(element).__qualname__


def probe(value: Any, name: str, missing: Any = None) -> Any:
    """``value``'s attribute ``name``, asked as ``getattr`` asks (through its ``__getattr__``:
    a proxy's, a lazy wrapper's that hands a tensor's on), or ``missing`` where the lookup
    says it has none: an object answering from a dict of its own raises KeyError for a name
    it has not, and a config of one was refused with a bare KeyError ('layout') in the job
    check. Any other error is raised: a lazy proxy loading its tensor there (a missing file,
    an out of memory) taken for no attribute wrote the proxy's text on that rank beside its
    peers' hash, a mismatch named in place of the cause."""
    try:
        return getattr(value, name, missing)
    except KeyError as exc:  # a __getattr__ answering from a mapping of its own: that name
        if exc.args != (name,):  # another key (a lazy proxy's missing state-dict entry)
            raise
        return missing
