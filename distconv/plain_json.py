"""JSON text of a value that may hold what JSON has no form for, the same in every process.

The job check compares such text across ranks (:func:`~distconv.sync.description.digest`),
and a run compares the scheme it records with the one its metrics log holds
(:func:`~distconv.sync.description.sync_scheme`); a layer's settings take an address out of
a part's text with :data:`ADDRESS` (:mod:`distconv.layers.settings`). It imports nothing of
distconv, so that the layers, which must not import :mod:`distconv.sync`, share it.

``json.dumps(..., default=str)`` gave another text in each process for two kinds of value: a
set, whose order follows ``PYTHONHASHSEED`` (``mpiexec`` starts each rank with its own), and an
object whose text holds its address. So ranks that agree were refused at setup, and a resume
under a run's own scheme recorded it anew.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: an object's address in its text: another in each process
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)``, a value JSON has no form for written by :func:`plain`."""
    return json.dumps(value, default=plain, **options)


def plain(value: Any) -> Any:
    """A value JSON has no form for, as ``json.dumps``'s ``default``: a numpy scalar as its
    number, a class as its qualified name (``np.float16``: ``float16``; a nested one as
    ``Outer.Codec``, as its instance is named), an object that says nothing of itself as its
    class's name (its default str has its address), anything else its str, an address in it
    taken out (``<unlocked _thread.lock object at 0x7f..>``); a set as a sorted list (its order
    follows ``PYTHONHASHSEED``, another in each process), its elements in the order of their
    JSON text, then their type's name."""
    if isinstance(value, type):
        return value.__qualname__
    if isinstance(value, (set, frozenset)):
        # by the text each is written as: by str, 1 and "1" tied and kept their hash order
        return sorted(value, key=_written)
    if type(value).__str__ is object.__str__ and type(value).__repr__ is object.__repr__:
        return type(value).__qualname__
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    return ADDRESS.sub("", str(value))


def _written(element: Any) -> tuple[str, str]:
    """A set's element as it is written, then its type's name: an order every process shares."""
    return dumps(element), type(element).__qualname__
