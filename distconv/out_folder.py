"""Whether a run's output directory (``distconv train --out``) can be made where it is named:
the check :meth:`distconv.run_dir.RunDir.acquire` makes before it makes the folder, and the
launcher before it starts anything (``distconv-launch local -- --out PATH``), where the shards
that keep their checkpoint parts there met the problem first, under a flag of their own. The
launcher also asks whether this process can make it and write in it (:func:`out_write_problem`),
which ``distconv train`` leaves to the ``mkdir`` that meets it: one check
(:func:`folder_write_problem`) that a shard makes of its ``--checkpoint-dir`` too, so that the
launcher refuses all a shard would."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

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


class WriteProblem(NamedTuple):
    """Why this process cannot make a folder, or write in it (:func:`folder_write_problem`):
    ``cause`` follows ``cannot make it:`` where ``to_make`` (``read-only file system in F``,
    ``file name too long (...)``), else the folder's name (``read-only file system there``)."""

    to_make: bool
    cause: str


def folder_write_problem(
    folder: str | os.PathLike, show: Callable[[str], str] = str
) -> WriteProblem | None:
    """Why this process cannot make ``folder`` or write in it, or None: the nearest folder of it
    that is there (where ``mkdir -p`` starts) is on a read-only file system or not writable by
    this process (``os.access``, which a read-only mount refuses for root too), or a name to
    make below it is longer than its file system takes. Nothing is made, no probe file written.
    A shard asks it of its ``--checkpoint-dir`` at start, the launcher of the ``--out`` after
    ``--`` (whose folder the shards keep their parts in) before it starts anything. ``show``
    writes each path it names."""
    path = Path(folder)
    there = next((p for p in (path, *path.parents) if os.path.isdir(p)), Path.cwd())
    if (too_long := _name_too_long(path, there, show)) is not None:
        return WriteProblem(True, too_long)
    if os.access(there, os.W_OK | os.X_OK):
        return None
    # the cause, as every other message about that disk says it: access() gives none
    why = "read-only file system" if _read_only(there) else "this process cannot write"
    if there == path:
        return WriteProblem(False, f"{why} there")
    return WriteProblem(True, f"{why} in {show(str(there))}")


def out_write_problem(root: str | os.PathLike, show: Callable[[str], str] = str) -> str | None:
    """Why this process cannot make ``root`` or write in it (:func:`folder_write_problem`), in
    the words of :func:`out_folder_problem` (``output directory R cannot be made: ...``), or
    None. The launcher asks before it starts anything: a ``/proc/self/r``, a read-only mount or
    a name too long reached the shards first, under their ``--checkpoint-dir``."""
    if (problem := folder_write_problem(root, show)) is None:
        return None
    how = "made" if problem.to_make else "written"
    return f"output directory {show(os.fspath(root))} cannot be {how}: {problem.cause}"


def _name_too_long(path: Path, there: Path, show: Callable[[str], str]) -> str | None:
    """Why a folder to make between ``there`` and ``path`` cannot be made for the length of its
    name, or None: mkdir's ``file name too long``, which a shard's first part would meet an
    epoch or hours in. Measured against the file system of ``there``."""
    try:
        most = os.pathconf(there, "PC_NAME_MAX")
    except (OSError, ValueError):  # not told: the mkdir that meets it names it
        return None
    for level in (path, *path.parents):
        if level == there:
            return None
        size = len(os.fsencode(level.name))
        if size > most:
            where = show(str(there))
            return f"file name too long ({size} bytes in a name, where {where} takes {most})"
    return None


def _read_only(folder: Path) -> bool:
    """Whether ``folder`` is on a file system mounted read-only (no answer: not said)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False
