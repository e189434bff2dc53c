"""The run directory's lock: a launch holds ``<run_dir>/launch.lock`` (``flock``) while it
runs a job, so that a second launch into the same directory is refused, naming the first,
instead of mixing its children's lines into the first's logs or deleting its report."""

from __future__ import annotations

from pathlib import Path

from distconv.files import LockTaken, describe_os_error, hold_lock

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
            named; or the lock cannot be taken there (no ``flock``), naming the file.
    """
    make_run_dir(run_dir)
    lock = run_dir / LAUNCH_LOCK
    try:
        return hold_lock(lock)
    except LockTaken as holder:
        raise LaunchError(
            f"{shown(run_dir)} is in use by the launch of {holder}; two launches must not "
            "share a run directory (choose another --run-dir or --job-id)"
        ) from None
    except OSError as exc:  # flock's own error names no file: '[Errno 37] No locks ...'
        raise LaunchError(f"cannot take {shown(lock)}: {describe_os_error(exc)}") from None
