"""The text :mod:`distconv.plain_json` writes a module and a function by: what names it, the
same in every process that holds it, never its address nor its install path. It imports
nothing of distconv: :mod:`distconv.plain_json`, which the layers share, imports it.
"""

from __future__ import annotations

import types
from typing import Any


def code_name(value: Any) -> str | None:
    """The text of a module (``<module 'json'>``), or None where ``value`` is written
    otherwise. A module's own text held its file's path (``<module 'x' from
    '/home/a/venv/...'>``): another on each host or venv, so ranks that agree disagreed."""
    if isinstance(value, types.ModuleType):
        return f"<module {value.__name__!r}>"
    return None
