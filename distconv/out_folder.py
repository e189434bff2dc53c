"""Whether a run's output directory (``distconv train --out``) can be made where it is named:
the check :meth:`distconv.run_dir.RunDir.acquire` makes before it makes the folder, and the
launcher before it starts anything (``distconv-launch local -- --out PATH``), where the shards
that keep their checkpoint parts there met the problem first, under a flag of their own."""

from __future__ import annotations

import os
from collections.abc import Callable

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
