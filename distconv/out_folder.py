"""Whether a run's output directory (``distconv train --out``) can be made where it is named:
the check :meth:`distconv.run_dir.RunDir.acquire` makes before it makes the folder, and the
launcher before it starts anything (``distconv-launch local -- --out PATH``), where the shards
that keep their checkpoint parts there met the problem first, under a flag of their own. The
launcher also asks whether it can be written (:func:`out_write_problem`), which ``distconv
train`` leaves to the ``mkdir`` that meets it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from distconv.files import folder_problem


def out_folder_problem(root: str | os.PathLike, show: Callable[[str], str] = str) -> str | None:
    """Why ``root`` cannot be a run's output directory, in ``distconv train``'s words
    (``output directory R cannot be made: F is a file, not a folder``), or None: it is a file,
    or a folder above it is a file or a symlink to nowhere (:func:`folder_problem`). Nothing is
    made; a disk that refuses the folder is said by the ``mkdir`` that meets it. ``show``
    writes each path it names (the launcher quotes them)."""
    if os.path.exists(root) and not os.path.isdir(root):  # os.path: no raising
        return f"output directory {show(os.fspath(root))} exists and is not a directory"
    # a file or a dangling link above it failed as 'cannot take <root>/run.lock: file exists'
    if (problem := folder_problem(root, show)) is not None:
        return f"output directory {show(os.fspath(root))} cannot be made: {problem}"
    return None


def out_write_problem(root: str | os.PathLike, show: Callable[[str], str] = str) -> str | None:
    """Why this process cannot make ``root`` or write in it, or None: the nearest folder of it
    that is there (where ``mkdir -p`` starts) is on a read-only file system or not writable by
    this process (``os.access``, which a read-only mount refuses for root too). The launcher
    asks before it starts anything, as the shards do of their ``--checkpoint-dir``: a
    ``/proc/self/r`` or a read-only mount reached them first, under that flag."""
    path = Path(root)
    there = next((p for p in (path, *path.parents) if os.path.isdir(p)), Path.cwd())
    if os.access(there, os.W_OK | os.X_OK):
        return None
    why = "read-only file system" if _read_only(there) else "this process cannot write"
    if there == path:
        return f"output directory {show(os.fspath(root))} cannot be written: {why} there"
    return f"output directory {show(os.fspath(root))} cannot be made: {why} in {show(str(there))}"


def _read_only(folder: Path) -> bool:
    """Whether ``folder`` is on a file system mounted read-only (no answer: not said)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False
