"""The run directory's lock: a launch holds ``<run_dir>/launch.lock`` (``flock``) while it
runs a job, so that a second launch into the same directory is refused, naming the first,
instead of mixing its children's lines into the first's logs or deleting its report."""

from __future__ import annotations

import errno
from pathlib import Path

from distconv.files import LockTaken, describe_os_error, hold_lock
from distconv.run_holder import wait_or_choose

from .commands import LaunchError
from .run_dir import make_run_dir
from .shown import shown

#: held (flock) by the launcher in its run directory while it runs a job
LAUNCH_LOCK = "launch.lock"


def hold_run_dir(run_dir: Path) -> int:
    """Make ``run_dir`` where it is missing and take its :data:`LAUNCH_LOCK`; returns the
    lock's descriptor (closing it lets the directory go; so does the launcher's death).

    Raises:
        LaunchError: it cannot be made (:func:`make_run_dir`); another launch holds it,
            named, with the ways on; or the lock cannot be taken there (no ``flock``), naming
            the file and the way out.
    """
    make_run_dir(run_dir)
    lock = run_dir / LAUNCH_LOCK
    try:
        return hold_lock(lock)
    except LockTaken as holder:
        raise LaunchError(
            f"{shown(run_dir)} is in use by the launch of {holder}; two launches must not "
            f"share a run directory: {wait_or_choose('that launch', '--run-dir or --job-id')}"
        ) from None
    except OSError as exc:  # flock's own error names no file: '[Errno 37] No locks ...'
        raise LaunchError(f"cannot take {shown(lock)}: {_lock_refused(exc)}") from None


def _lock_refused(exc: OSError) -> str:
    """Why the lock could not be taken, and where it is a file system without ``flock``
    (ENOLCK), the way out: a run directory on another file system."""
    said = describe_os_error(exc)
    if exc.errno != errno.ENOLCK:
        return said
    return (
        f"{said} (its file system takes no flock, as an NFS mount without locking: choose a "
        "--run-dir on one that does, a local disk)"
    )
