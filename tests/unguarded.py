"""A sync method without the guard the sync base puts on every transport's step methods, for
tests that run it on a stand-in object."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def unguarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` without the guard the sync base puts on a transport's step methods (it
    refuses a closed strategy, or one whose base ``__init__`` never ran): for a test that runs
    a transport's method on a stand-in holding only what that method reads. Every layer is
    taken off: ``finish_step`` and ``abandon_step`` are wrapped twice (the guard, then the
    step's end, which reads the base's own record of the step)."""
    return inspect.unwrap(method)
