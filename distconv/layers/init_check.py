"""Whether a layer of one's own ran :meth:`Layer.__init__ <distconv.layers.base.Layer>` in its
``__init__``: without it, the layer failed far from where it was made."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

#: what ``Layer.__init__`` sets: reading one before it runs is the skipped ``super().__init__()``
BASE_FIELDS = frozenset({"name", "act", "_params", "_owned", "inputs", "output"})


def checks_init(init: Callable[..., None]) -> Callable[..., None]:
    """``init``, then a TypeError where :meth:`Layer.__init__` did not run in it, or where an
    attribute the base sets was read on the layer before it ran: a layer of one's own without
    ``super().__init__()`` failed far away with "object has no attribute '_owned'" (or
    ``'name'``, ``'_params'``). Any other AttributeError is the subclass's own and passes."""

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except AttributeError as exc:
            # a config's typo (cfg.widht) before the base ran was called a skipped base
            if "_params" in vars(self) or exc.obj is not self or exc.name not in BASE_FIELDS:
                raise
            raise _no_base_init(self, f"failed ({exc}) before") from exc
        if "_params" not in vars(self):
            raise _no_base_init(self, "returned without")

    return checked


def _no_base_init(layer: Any, what: str) -> TypeError:
    return TypeError(
        f"{type(layer).__name__}.__init__ {what} calling super().__init__(act=..., name=...): "
        "the Layer base holds the name, activation and parameters (call it before new_param)"
    )
