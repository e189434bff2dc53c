"""What a sync's refusal of a gradient not given to setup adds where a parameter of that name
was: the gradient is another model's, one rebuilt (or restored into a new ``Network``) after
``setup``. Every transport says it in these words, so a script moved from one to another reads
the same refusal."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: appended to "gradient of 'fc.bias', which was not given to setup"
ANOTHER_MODELS = " (a parameter of that name was: another model's)"


def whose(param: Any, given: Iterable[Any]) -> str:
    """:data:`ANOTHER_MODELS` where ``param`` is not one of ``given`` (the parameters setup
    was given) but one of them has its name; "" otherwise. A scan of ``given``: for a refusal
    only, never per gradient."""
    given = list(given)
    if any(p is param for p in given):
        return ""
    return ANOTHER_MODELS if any(p.name == param.name for p in given) else ""
