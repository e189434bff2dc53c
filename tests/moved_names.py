"""The check shared by the tests of a piece moved into a module of its own: each name is
defined there, and the module it came from still gives the same object, so that what imports
it from there (other modules, the docs, users) keeps working."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from types import ModuleType


def assert_moved(old: ModuleType, new: ModuleType, names: Iterable[str]) -> None:
    """Each of ``names`` is ``new``'s own (a function or class made there) and ``old``'s too."""
    for name in names:
        assert name in vars(new), f"{name} is not in {new.__name__}"
        moved = vars(new)[name]
        assert getattr(old, name, None) is moved, f"{old.__name__}.{name} is not {new.__name__}'s"
        if inspect.isfunction(moved) or inspect.isclass(moved):
            assert moved.__module__ == new.__name__, f"{name} is made in {moved.__module__}"
