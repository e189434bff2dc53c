"""Whether a subclass of one's own (a layer, a sync strategy) ran its base's ``__init__`` in
its own: without ``super().__init__()`` it failed far from where it was made, on an attribute
the base sets ("object has no attribute '_owned'", "... 'world_size'"). And where a warning
about such a subclass points: at its ``class`` statement."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import is_dataclass
from typing import Any


def checks_base_init(
    init: Callable[..., None],
    owner: str,
    marker: str,
    call: str,
    base_fields: frozenset[str] = frozenset(),
) -> Callable[..., None]:
    """``init``, class ``owner``'s (a subclass whose ``__init__`` calls it is not to blame),
    then a TypeError where the base's ``__init__`` did not run in it (``marker``, an attribute
    the base sets, is not on the object), or where one of ``base_fields`` was read before it
    ran. Any other AttributeError (a config's typo, ``cfg.widht``) is the subclass's own and
    passes.

    Args:
        init: the subclass's ``__init__``.
        owner: the name of the class whose ``__init__`` it is.
        marker: an attribute the base's ``__init__`` sets.
        call: the call to make and why, for the message (``super().__init__(...): the
            Layer base holds ...``).
        base_fields: the attributes the base sets, whose reading before it is the skip.
    """

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except AttributeError as exc:
            if marker in vars(self) or exc.obj is not self or exc.name not in base_fields:
                raise
            raise TypeError(f"{owner}.__init__ failed ({exc}) before calling {call}") from exc
        if marker not in vars(self):
            raise TypeError(f"{owner}.__init__ returned without calling {call}")

    return checked


def refuse_skipped_base_init(obj: Any, marker: str, call: str) -> None:
    """Raise a TypeError naming ``obj``'s class where its base's ``__init__`` never ran on it
    (``marker``, an attribute the base sets, is not on it): a ``@dataclass`` subclass's
    generated ``__init__`` never calls it, and is set after ``__init_subclass__`` wrapped the
    class's own, so :func:`checks_base_init` never saw it. Called where the object is first
    used (a Network's ``add``, a sync's ``setup``, the Trainer), not on each step.

    Args:
        obj: the layer or strategy.
        marker: an attribute the base's ``__init__`` sets (and a dataclass field does not),
            the one :func:`checks_base_init` is given: one that set another itself passed
            there and was then told how a dataclass calls the base.
        call: the call to make and why, for the message.
    """
    if marker not in vars(obj):  # the dataclass's hint for a dataclass: another was made around
        hint = "; a dataclass calls it in __post_init__" if is_dataclass(obj) else ""
        raise TypeError(f"{type(obj).__name__} was made without calling {call}{hint}")


def class_statement_level() -> int:
    """``warnings.warn``'s stacklevel, from an ``__init_subclass__``, for the line that made
    the class: past every ``__init_subclass__`` (a user's base class may have one calling
    ``super()``'s) and metaclass ``__new__`` (``ABCMeta``'s) between."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_name in ("__init_subclass__", "__new__"):
        frame, level = frame.f_back, level + 1
    return level
