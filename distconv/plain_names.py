"""The text :mod:`distconv.plain_json` writes a module and a function by: what names it, the
same in every process that holds it, never its address nor its install path. It imports
nothing of distconv: :mod:`distconv.plain_json`, which the layers share, imports it.
"""

from __future__ import annotations

import types
from typing import Any


def code_name(value: Any) -> str | None:
    """The text of a module (``<module 'json'>``) or a Python function (``<function
    pkg.mod.scale>``), or None where ``value`` is written otherwise.

    A module's own text held its file's path (``<module 'x' from '/home/a/venv/...'>``):
    another on each host or venv, so ranks that agree disagreed. A function's held its
    address, and less it, its qualified name alone: two modules' ``scale`` agreed, and so did
    any two lambdas. Its module tells the first apart. A lambda (``<lambda>``), or a function
    made in another's call (``make.<locals>.scale``), is not the only one of its qualified name
    in its module, so its first line follows: ``<function pkg.mod.<lambda> line 12>``, the same
    in each process that runs that source (no path in it), another where the source moved.
    Two lambdas on one line still agree, as do a closure's copies over other captured values.
    """
    if isinstance(value, types.ModuleType):
        return f"<module {value.__name__!r}>"
    if isinstance(value, types.FunctionType):
        name = f"{value.__module__}.{value.__qualname__}"
        if "<" in value.__qualname__:  # <lambda>, <locals>: not one function of its module
            name += f" line {value.__code__.co_firstlineno}"
        return f"<function {name}>"
    return None
