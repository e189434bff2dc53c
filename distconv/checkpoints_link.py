"""A run's ``checkpoints`` that links to another disk, checked before a resume scans it: a disk
not mounted yet (a replacement node's mount late) reads as an empty folder or as nothing, which
a scan takes for a run with no checkpoint, words a launcher reads as a refusal every attempt
meets. Named as what it is, the launcher restarts it: the next attempt may find the disk."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

#: what a ``checkpoints`` link to a disk not there, or an unmounted mount point, is asked
NOT_MOUNTED = "(a disk not mounted yet?)"


def late_disk_problem(link: Path, wrote_checkpoints: Callable[[], bool]) -> str | None:
    """Why the ``checkpoints`` at ``link`` cannot be the run's, its disk not there: a link to
    nothing, or to an empty folder (a mount point, the disk not mounted on it) where
    ``wrote_checkpoints()`` (the run's metrics past what a run leaves before its first
    checkpoint) says the run had some. None for a folder, a file, or a link to one there."""
    if not link.is_symlink():
        return None
    target = os.readlink(link)
    try:
        os.stat(link)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # no disk mounts it there: every attempt meets it
            return f"{link} links to {target}, which cannot be followed (a loop of links)"
    if not link.exists():
        return f"{link} links to {target}, which is not there {NOT_MOUNTED}"
    if link.is_dir() and not any(link.iterdir()) and wrote_checkpoints():
        return (
            f"{link} links to {target}, which is empty though the run's metrics show it wrote "
            f"checkpoints {NOT_MOUNTED}"
        )
    return None
