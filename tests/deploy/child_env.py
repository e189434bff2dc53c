"""The environment a test gives a child process that imports this checkout: the checkout
first, then the parent's own ``PYTHONPATH`` in its order, so a run with another package
before the system's (``PYTHONPATH=repo:/tmp/pyyaml-6.0.4``) tests that package in its
children too, not the system's."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def child_path() -> str:
    """``PYTHONPATH`` for a child: this checkout, then the parent's entries, each once."""
    entries = [str(REPO_ROOT), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return os.pathsep.join(dict.fromkeys(entry for entry in entries if entry))


def child_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """``base`` (the parent's environment where None) with ``PYTHONPATH`` from
    :func:`child_path`, then ``extra``."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = child_path()
    env.update(extra)
    return env
