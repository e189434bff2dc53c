"""Who holds a run's output directory now, and the words a refusal of a held directory says.

A run's chief holds ``<out>/run.lock`` (``flock``) while it trains, and the lock file says who
(``pid N on HOST``). A refusal of that directory named a worker's pid alone, where the run's
claim (``<out>/run.claim``) records the job, and told someone resuming that "two runs must not
share an output directory", with no way on. The hints that list runs to resume named runs
still training as if they could be resumed now: they are marked with their holder.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from distconv.run_files import CLAIM, LOCK
from distconv.runtime import DEFAULT_JOB_ID


def wait_or_choose(that: str, flags: str) -> str:
    """The way on from a directory another live process holds, as the launcher's lock
    refusal and the run's both say it: ``wait for that launch to end (or stop it) to go on
    with this run, or choose another --run-dir or --job-id`` (``that``: who to wait for,
    ``flags``: those that pick another directory)."""
    return f"wait for {that} to end (or stop it) to go on with this run, or choose another {flags}"


def in_use_refusal(root: Path, holder: str) -> str:
    """``runs/x is in use by pid N on HOST (job J): that run is still going; wait ...``: the
    refusal of ``root``, whose lock ``holder`` holds (:class:`~distconv.files.LockTaken`'s
    words), naming the job its claim records (:func:`claimed_job`) where there is one."""
    job = claimed_job(root)
    of_job = f" (job {job})" if job else ""
    return (
        f"{root} is in use by {holder}{of_job}: that run is still going; "
        f"{wait_or_choose('it', '--out')}"
    )


def claimed_job(root: Path) -> str | None:
    """The job id ``root``'s claim records (the job that began its run); None where it records
    none, or the default of a run given no job id (:data:`~distconv.runtime.DEFAULT_JOB_ID`,
    which tells no run apart), or cannot be read: a refusal names no job then. Read quietly:
    the run's own reader (:func:`distconv.job_start.claimed_by`) warns."""
    try:
        record = json.loads((root / CLAIM).read_bytes())
    except (OSError, ValueError):
        return None
    job = record.get("job") if isinstance(record, dict) else None
    return job if isinstance(job, str) and job not in ("", DEFAULT_JOB_ID) else None


def lock_holder(root: str | os.PathLike[str]) -> str | None:
    """Who holds ``root``'s run lock now (``pid N on HOST``, as its holder wrote it); None
    where no live process holds it, or there is no lock to read.

    The lock is tried, shared and without waiting, then let go at once: the kernel alone knows
    whether a live process holds it (the file's words outlive their writer). A run starting in
    ``root`` within those microseconds is refused as in use; only a refusal's hint looks.
    """
    try:
        fd = os.open(os.path.join(root, LOCK), os.O_RDONLY)
    except OSError:  # none: no run ever took it; out of reach: no sign either way
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        except OSError:  # no flock on its file system: no sign either way
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
