"""The environment a test gives a child process that imports this checkout: the checkout
first, then the parent's own ``PYTHONPATH`` in its order, so a run with another package
before the system's (``PYTHONPATH=repo:/tmp/pyyaml-6.0.4``) tests that package in its
children too, not the system's."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def child_path(*first: str | os.PathLike) -> str:
    """``PYTHONPATH`` for a child: ``first`` (folders a test puts before everything, such as
    one holding a fault-injecting ``sitecustomize``), this checkout, then the parent's entries,
    each once, a relative one made absolute from the parent's working directory (as the
    parent's ``sys.path`` holds it), so that a child run from another folder reads the same
    ones."""
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    absolute = (os.path.abspath(entry) for entry in entries if entry)
    named = [os.fspath(folder) for folder in first]
    return os.pathsep.join(dict.fromkeys([*named, str(REPO_ROOT), *absolute]))


def child_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """``base`` (the parent's environment where None) with ``PYTHONPATH`` from
    :func:`child_path`, then ``extra``."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = child_path()
    env.update(extra)
    return env
