"""A run's ``checkpoints`` that links to another disk, checked before a resume scans it: a disk
not mounted yet (a replacement node's mount late) reads as an empty folder or as nothing, which
a scan takes for a run with no checkpoint, words a launcher reads as a refusal every attempt
meets. Named as what it is, the launcher restarts it: the next attempt may find the disk.

An empty folder is a mount point with no disk on it only where something says the run had more:
its metrics, past what a run leaves before its first checkpoint, or its claim, which records the
mount point ``checkpoints`` linked to when the run began (:func:`mount_record`). A run cut short
in its first epoch has no such metrics; without that record, its restart started afresh on the
folder under the mount point, whose checkpoints the disk, once mounted, hid."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path

#: what a ``checkpoints`` link to a disk not there, or an unmounted mount point, is asked
NOT_MOUNTED = "(a disk not mounted yet?)"
#: the claim's key naming the mount point a run's ``checkpoints`` linked to when it began
MOUNT_KEY = "checkpoints_mount"


def late_disk_problem(
    link: Path, wrote_checkpoints: Callable[[], bool], mounted_at: str | None = None
) -> str | None:
    """Why the ``checkpoints`` at ``link`` cannot be the run's, its disk not there: a link to
    nothing, or to an empty folder (a mount point, the disk not mounted on it) where
    ``wrote_checkpoints()`` (the run's metrics past what a run leaves before its first
    checkpoint) says the run had some, or an empty ``mounted_at`` (the mount point it linked to
    when the run began, :func:`recorded_mount`) that is no mount point now. None for a folder, a
    file, or a link to one there that holds something (the run copied to where that path is a
    plain folder, or its disk mounted at a folder above it): its files are read as they are."""
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
    if not link.is_dir() or any(link.iterdir()):  # what is there is read as it is
        return None
    # an empty folder: the mount point, with no disk on it, of a run that had more
    if mounted_at is not None and os.path.realpath(link) == mounted_at:
        if not os.path.ismount(mounted_at):  # what was on it is not: the folder beneath
            return (
                f"{link} links to {target}, which was a mount point when the run began and is "
                f"none now {NOT_MOUNTED}"
            )
    if wrote_checkpoints():
        return (
            f"{link} links to {target}, which is empty though the run's metrics show it wrote "
            f"checkpoints {NOT_MOUNTED}"
        )
    return None


def mount_record(link: Path) -> dict[str, str]:
    """What a run's claim records of its ``checkpoints`` at ``link``: the mount point it links
    to (resolved, :data:`MOUNT_KEY`), where it links to one; nothing otherwise (a folder, a link
    into a disk's folders, which its disk's absence leaves as a link to nothing)."""
    if not link.is_symlink():
        return {}
    target = os.path.realpath(link)
    return {MOUNT_KEY: target} if os.path.ismount(target) else {}


def recorded_mount(claim: Path) -> str | None:
    """The mount point the run's claim at ``claim`` records (:func:`mount_record`); None where
    it records none, or cannot be read (its reader, :func:`distconv.job_start.claimed_by`,
    warns of that): no sign either way."""
    try:
        record = json.loads(claim.read_bytes())
    except (OSError, ValueError):
        return None
    found = record.get(MOUNT_KEY) if isinstance(record, dict) else None
    return found if isinstance(found, str) else None
