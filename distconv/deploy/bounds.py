"""What a document may be before the checks read it: how deep it nests and how many values it
holds once its aliases are expanded. PyYAML shares one object for each alias, and
:func:`~distconv.deploy.walk.as_applied` copies the manifests with every alias expanded: a
billion laughs would be built for ever, and a document that holds itself (``&a [*a]``) recursed
without end. :func:`shape_problem` measures a document without recursion, each shared value
once, for :func:`~distconv.deploy.check.manifest_problems` and ``distconv check-manifests``.
"""

from __future__ import annotations

import json
import json.scanner
import re
import sys
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

#: the deepest nesting read: kubectl's own bound (Go's encoding/json and go-yaml refuse a
#: document nested deeper than 10000 levels), far past any manifest: a CRD that inlines a
#: recursive schema (no $ref in a CRD) adds levels for each level it inlines, a few hundred at
#: most. The walkers are iterative; the readers that recurse are given room (:func:`room_to_nest`)
MAX_DEPTH = 10_000
#: the Python frames a reader may take for each level: PyYAML's own composer (where libyaml is
#: missing) and merge keys recurse two or three a level, json's scanner one
_FRAMES_PER_LEVEL = 4
#: json's decoder: its C scanner (fast), and its Python one, whose recursion is only Python's
_JSON = json.JSONDecoder()
_JSON_IN_PYTHON = json.JSONDecoder()
_JSON_IN_PYTHON.scan_once = json.scanner.py_make_scanner(_JSON_IN_PYTHON)  # type: ignore[attr-defined]
#: what libyaml says where it will nest no deeper (PyYAML 6.0.4's wheels: past 1000 levels)
_LIBYAML_NESTING = "exceeded maximum nesting depth"
#: a JSON string, or a bracket outside one, as :func:`json_depth_problem` reads them
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[][{}]')
#: more values than aliases may add to a document: more than an object the API server stores
#: can hold (etcd takes 1.5 MiB a request). What a document writes out is not bounded here (a
#: List of 3000 pods from ``kubectl get -o yaml`` holds a million): it takes the memory its text
#: does, which the command bounds (64 MiB)
MAX_VALUES = 1_000_000


@contextmanager
def room_to_nest() -> Iterator[None]:
    """Python's recursion limit raised while the block runs, so that a reader that recurses
    for each level (PyYAML's constructor, json's scanner) builds a document :data:`MAX_DEPTH`
    deep; restored after. Only what :func:`yaml_depth_problem` or :func:`json_depth_problem`
    passed is read in it: the C stack is never asked for more than :data:`MAX_DEPTH` levels."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + _FRAMES_PER_LEVEL * MAX_DEPTH)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def decode_json(text: str, start: int) -> tuple[Any, int]:
    """The JSON document of ``text`` at ``start``, and where it ends (``raw_decode``), run in
    :func:`room_to_nest` on what :func:`json_depth_problem` passed. Python 3.12 and later bound
    the C scanner's recursion apart from :func:`sys.setrecursionlimit` (3.12.1: under 5000
    levels), so a document it cannot nest is decoded again by json's Python scanner, whose
    calls count against the raised limit alone: :data:`MAX_DEPTH` levels read on each version."""
    try:
        return _JSON.raw_decode(text, start)
    except RecursionError:
        return _JSON_IN_PYTHON.raw_decode(text, start)


def yaml_depth_problem(text: str, loaders: Sequence[Any]) -> tuple[str | None, Any]:
    """Which document of YAML ``text`` nests deeper than :data:`MAX_DEPTH`, before it is built
    (libyaml's composer recurses in C: ``[[[[...`` 100000 deep crashed the process), or None;
    and the first of ``loaders`` (libyaml's, then PyYAML's own) that nests it as deep as it
    is, to build it with. The libyaml of PyYAML 6.0.4's wheels refuses past 1000 levels
    ("exceeded maximum nesting depth"), a tenth of what kubectl reads; PyYAML's own reads it.
    The parser's events, read without recursion, say how deep each document is."""
    import yaml  # only the command reads YAML text; the checks import this module too

    *fast, last = loaders
    for loader in fast:
        try:
            return _yaml_depth(text, loader), loader
        except yaml.MarkedYAMLError as exc:
            if exc.problem != _LIBYAML_NESTING:
                raise
    return _yaml_depth(text, last), last


def _yaml_depth(text: str, loader: Any) -> str | None:
    import yaml

    number = depth = line = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.DocumentStartEvent):
            number += 1
        elif isinstance(event, yaml.CollectionStartEvent):
            line = event.start_mark.line + 1 if depth == 0 else line
            depth += 1
            if depth > MAX_DEPTH:
                return _too_deep(number, line)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def json_depth_problem(text: str) -> str | None:
    """Which JSON document of ``text`` (a stream of them) nests deeper than :data:`MAX_DEPTH`,
    before it is decoded (json's scanner recurses in C), read without recursion; None where
    none does. Brackets inside strings are no nesting."""
    number = depth = start = 0
    for token in _JSON_TOKEN.finditer(text):
        bracket = token.group()
        if bracket in ("[", "{"):
            number, start = (number + 1, token.start()) if depth == 0 else (number, start)
            depth += 1
            if depth > MAX_DEPTH:
                return _too_deep(number, text.count("\n", 0, start) + 1)
        elif bracket in ("]", "}"):
            depth = max(depth - 1, 0)
    return None


def _too_deep(number: int, line: int) -> str:
    return f"document {number} (line {line}) is nested deeper than {MAX_DEPTH} levels"


def each_key_once(
    pairs: list[tuple[Any, Any]], dict_key: Callable[[Any], Hashable]
) -> list[tuple[Any, Any]]:
    """``pairs`` (key node, value node) with one pair per key, as a dict keeps it: the first
    key's place and node, the last value; ``dict_key`` says which keys a dict takes for one.
    A merge key's pairs flattened so hold no more than the keys they have (``<<: [*m, *m]``
    nine deep made 9**10 pairs)."""
    kept: list[tuple[Any, Any]] = []
    place: dict[Hashable, int] = {}
    for key, value in pairs:
        same = dict_key(key)
        if same in place:
            kept[place[same]] = (kept[place[same]][0], value)
        else:
            place[same] = len(kept)
            kept.append((key, value))
    return kept


def refuse_unreadable(docs: Sequence[Any]) -> None:
    """Raise :class:`ValueError` for the first of ``docs`` the checks cannot read
    (:func:`shape_problem`: ``yaml.safe_load`` of a hostile file), before the copy that expands
    its aliases recurses without end or fills memory."""
    for number, doc in enumerate(docs, 1):
        problem = shape_problem(doc)
        if problem:
            raise ValueError(f"document {number} {problem}")


def shape_problem(doc: Any) -> str | None:
    """Why the checks cannot read ``doc`` (a YAML document as loaded): it holds itself (an
    alias inside its own anchor, which Go's YAML, kubectl's, refuses too), nests deeper than
    :data:`MAX_DEPTH`, or holds more than :data:`MAX_VALUES` values with its aliases expanded
    that it does not write out (Go's YAML refuses "excessive aliasing", not a long document);
    None where they can."""
    measured = _measure(doc)
    if measured is None:
        return "holds itself (an alias inside its own anchor)"
    depth, values, written = measured
    if depth > MAX_DEPTH:
        return f"is nested deeper than {MAX_DEPTH} levels"
    if values - written > MAX_VALUES:
        return f"holds over {MAX_VALUES} values once its aliases are expanded"
    return None


def _measure(doc: Any) -> tuple[int, int, int] | None:
    """How deep ``doc``'s mappings and lists nest, how many values it holds with each alias
    expanded, and how many it writes out (each shared value once), or None where one holds
    itself. Without recursion, and each shared value once: a billion laughs is measured in a
    moment, not expanded."""
    done: dict[int, tuple[int, int]] = {}
    open_ids: set[int] = set()
    stack: list[tuple[Any, bool]] = [(doc, False)]
    written = 1
    while stack:
        value, children_done = stack.pop()
        key = id(value)
        if not isinstance(value, (dict, list)) or (key in done and not children_done):
            continue
        children = list(value.values() if isinstance(value, dict) else value)
        if children_done:  # each child is measured: add them up
            open_ids.discard(key)
            sizes = [done.get(id(child), (0, 1)) for child in children]
            done[key] = (1 + max((d for d, _ in sizes), default=0), 1 + sum(n for _, n in sizes))
            written += len(children)
        elif key in open_ids:  # one of its own parents
            return None
        else:
            open_ids.add(key)
            stack.append((value, True))
            stack.extend((child, False) for child in children)
    return (*done.get(id(doc), (0, 1)), written)
