"""A real full disk for tests: a small tmpfs mounted for one test, where this user may mount."""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's spelling: ``64k``, ``4m``) at ``where/small``, unmounted
    after; the test is skipped where mount is refused."""
    mount = where / "small"
    mount.mkdir()
    name = f"distconv-test-{uuid.uuid4().hex[:6]}"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", name, str(mount)], capture_output=True
    )
    if done.returncode:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)  # lazy: never busy
