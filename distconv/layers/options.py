"""Options a layer's constructor hands on to a method of its own (a FullyConnected subclass's
``_configure``, a convolution's ``_build``), bound before anything is built: Python's own error
named that private method ("ConvNd._build() got an unexpected keyword argument"), not the class
the user called, and said neither the cause nor the way out."""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable
from typing import Any

#: the kinds of parameter a method takes positionally
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
#: the kinds of parameter an option may be given by name
_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def options_problem(method: Callable[..., Any], /, *args: Any, **kwargs: Any) -> str | None:
    """Why ``method(*args, **kwargs)`` would fail to bind, in Python's words without the
    method's name and with the way out where there is one, or None.

    ``method`` is positional only: an option may be named so, as SelectiveFullyConnected's is.
    Bound, not called: nothing is built (no weight drawn) before the error.
    """
    try:
        inspect.signature(method).bind(*args, **kwargs)
    except TypeError as exc:
        return str(exc) + _way_out(str(exc), method)
    return None


def positional_names(method: Callable[..., Any]) -> tuple[str, ...]:
    """The names ``method`` takes positionally, in order."""
    params = inspect.signature(method).parameters.values()
    return tuple(p.name for p in params if p.kind in _POSITIONAL)


def _way_out(problem: str, method: Callable[..., Any]) -> str:
    """What to do about ``problem``: an option given twice is given once; a misspelt one is
    named as the option it is close to (of ``method``, or of the constructor of the object it
    is bound to); "" where there is nothing to add."""
    if match := re.search(r"multiple values for argument '(\w+)'", problem):
        return f" (given positionally and as {match[1]}=: give it once)"
    match = re.search(r"unexpected keyword argument '(\w+)'", problem)
    if match is None:
        return ""
    owner = getattr(method, "__self__", None)
    takers = [method] + ([type(owner).__init__] if owner is not None else [])
    names = {
        p.name for m in takers for p in inspect.signature(m).parameters.values() if p.kind in _NAMED
    }
    close = difflib.get_close_matches(match[1], sorted(names - {"self"}), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
