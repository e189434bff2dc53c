"""The run directory a job writes its logs, keys, ``failure.json`` and ``restarts.jsonl`` in: a
refusal of it, or of what the launcher makes in it, is one line naming the flags that choose
another, never Python's ``[Errno N] ...: 'PATH'``."""

from __future__ import annotations

from pathlib import Path

from distconv.files import describe_os_error, folder_problem

from .commands import LaunchError
from .restarts import RESTARTS_NAME
from .shown import shown


def run_dir_refused(run_dir: Path, problem: str) -> LaunchError:
    """The error for a run directory ``run_dir`` that cannot be made, for ``problem``."""
    return LaunchError(
        f"the run directory {shown(run_dir)} cannot be made: {problem} (choose another "
        "--run-dir or --job-id)"
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


def clear_run_dir(run_dir: Path) -> None:
    """Make ``run_dir``'s ``logs`` folder where missing and remove the ``failure.json`` and
    ``restarts.jsonl`` (:mod:`launcher.restarts`) of a run before, in a run directory made
    already (:func:`make_run_dir`), so that what is there describes this launch. A folder
    where ``restarts.jsonl`` goes is no launch's record, and is left: each line the launch
    cannot write there is a warning, not a refusal (the record is not worth the job).

    Raises:
        LaunchError: one of them is in the way (``logs`` a file, ``failure.json`` a folder) or
            out of reach, naming it and the cause: it said ``[Errno 17] File exists: 'PATH'``.
    """
    logs = run_dir / "logs"
    try:
        logs.mkdir(exist_ok=True)
        (run_dir / "failure.json").unlink(missing_ok=True)
        try:
            (run_dir / RESTARTS_NAME).unlink(missing_ok=True)
        except IsADirectoryError:  # no launch's record (a link to one is removed): left
            pass
    except OSError as exc:
        path = Path(exc.filename) if exc.filename else run_dir
        problem = (folder_problem(path, shown) if path == logs else None) or (
            f"{shown(path)}: {describe_os_error(exc)}"
        )
        raise LaunchError(
            f"the run directory {shown(run_dir)} cannot be used: {problem} (move it away, or "
            "choose another --run-dir or --job-id)"
        ) from None
