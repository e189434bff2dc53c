"""A fake pyenv for the tests of a launch's ``distconv`` by its path or its pyenv shim
(:mod:`launcher.pyenv_shim`): a shim as pyenv writes it, and a ``pyenv`` whose ``which
distconv`` runs what the test says."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

#: this install's console script, the file a launch's ``distconv`` is
SCRIPT = Path(sysconfig.get_path("scripts"), "distconv")
needs_script = pytest.mark.skipif(not SCRIPT.is_file(), reason="distconv is not installed here")
#: the arguments after it of a launch's train
TRAIN = ["train", "--epochs", "1"]

#: a pyenv shim as pyenv writes it (its root in place of ``/root/.pyenv``, the pyenv it execs
#: in place of ``/root/.pyenv/libexec/pyenv``)
_SHIM = """#!/usr/bin/env bash
set -e
program="${{0##*/}}"
export PYENV_ROOT="{root}"
exec "{install}/libexec/pyenv" exec "$program" "$@"
"""


def fake_pyenv(root: Path, which: str, install: Path | None = None) -> Path:
    """A pyenv at ``root`` (installed there, or in ``install``: Homebrew's) whose shim
    ``distconv`` it says runs ``which``; the shim's path."""
    install = root if install is None else install
    for folder in (root / "shims", install / "libexec"):
        folder.mkdir(parents=True, exist_ok=True)
    (install / "libexec" / "pyenv").write_text(
        f'#!/bin/sh\n[ "$1 $2" = "which distconv" ] && {which}\n'
    )
    (root / "shims" / "distconv").write_text(_SHIM.format(root=root, install=install))
    for tool in (install / "libexec" / "pyenv", root / "shims" / "distconv"):
        tool.chmod(0o755)
    return root / "shims" / "distconv"
