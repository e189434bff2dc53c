"""``typing.get_type_hints(create_sync)`` resolves ``SyncStrategy`` in a process that never
asked ``distconv.sync`` for it, and ``import distconv.sync`` still loads neither
SyncStrategy's module nor numpy."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.timeout(30)

_PROBE = """
import sys, typing
import distconv.sync
assert "distconv.sync.base" not in sys.modules and "numpy" not in sys.modules
hints = typing.get_type_hints(distconv.sync.create_sync)
from distconv.sync.base import SyncStrategy
assert hints["return"] is SyncStrategy, hints
"""


def test_create_sync_s_hints_resolve_before_its_lazy_names_are_asked_for():
    """``SyncStrategy`` is bound in ``distconv.sync`` only once asked for (PEP 562, so the
    package loads no numpy), and get_type_hints looks it up in the module's dict, not through
    its ``__getattr__``: a NameError in a fresh process (the lazy names' test asked for it
    first, so it never saw one)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=child_env(), timeout=25
    )
    assert done.returncode == 0, done.stderr
