"""A copy of this checkout's distconv source in a test's folder: another build, for a child
process to run beside this one (its folder first on ``PYTHONPATH``), the same code or edited."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.child_env import REPO_ROOT


def copy_source(folder: Path) -> Path:
    """Copy ``distconv/`` and ``launcher/`` (no compiled files) into ``folder``; returns it."""
    for package in ("distconv", "launcher"):
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(REPO_ROOT / package, folder / package, ignore=ignore)
    return folder


def edit(folder: Path, path: str, old: str, new: str) -> None:
    """Replace ``old`` (found exactly once) by ``new`` in ``folder/path``: a copy made
    another build, its difference chosen by the test."""
    file = folder / path
    text = file.read_text()
    assert text.count(old) == 1, f"{old!r} is not in {path} exactly once"
    file.write_text(text.replace(old, new))


#: the lines by which a worker takes a draining shard's ask to stop
#: (:mod:`distconv.sync.ps.stop_asked`); a worker of an older release has none
ASK_READ = """        if header["op"] == "ok" and (asker := asking_shard(header)) is not None:
            self.stop_asked_by_shard = asker
"""


def copy_ignoring_stop_asks(folder: Path) -> Path:
    """:func:`copy_source` into ``folder`` whose workers ignore a draining shard's ask to stop,
    as those of a release before it do (they train on past the shard's signal); returns it."""
    copy_source(folder)
    edit(folder, "distconv/sync/ps/intake.py", ASK_READ, "")
    return folder
