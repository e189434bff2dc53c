"""The run directory a job writes its logs, keys and ``failure.json`` in: a refusal of it is
one line naming the flags that choose another, never Python's ``[Errno N] ...: 'PATH'``."""

from __future__ import annotations

from pathlib import Path

from distconv.files import describe_os_error

from .commands import LaunchError


def run_dir_refused(run_dir: Path, problem: str) -> LaunchError:
    """The error for a run directory ``run_dir`` that cannot be made, for ``problem``."""
    return LaunchError(
        f"the run directory {run_dir} cannot be made: {problem} (choose another --run-dir or "
        "--job-id)"
    )


def make_run_dir(run_dir: Path) -> None:
    """Make ``run_dir`` and the folders above it where missing (``mkdir -p``).

    Raises:
        LaunchError: it cannot be made (a folder above it that takes no folders, as
            ``/proc``, a read-only file system, no permission), naming it and the cause: it
            said ``[Errno 2] No such file or directory: '/proc/nope'``, naming no flag.
    """
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise run_dir_refused(run_dir, describe_os_error(exc)) from None
