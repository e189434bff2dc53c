"""The layer tests' check that a constructor called wrongly is refused in the user's terms."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest


def assert_refused_saying(build: Callable[[], object], said: str) -> None:
    """``build()`` raises ``TypeError`` saying ``said`` and nothing more: the whole message, so
    that one naming another class (the mixin that defines the constructor) or dropping the
    way out fails."""
    with pytest.raises(TypeError, match="^" + re.escape(said) + "$"):
        build()
