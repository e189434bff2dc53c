"""Who holds a run's output directory now, and the words a refusal of a held directory says.

A run's chief holds ``<out>/run.lock`` (``flock``) while it trains, and the lock file says who
(``pid N on HOST``). A refusal of that directory named a worker's pid alone, where the run's
claim (``<out>/run.claim``) records the job, and told someone resuming that "two runs must not
share an output directory", with no way on. The hints that list runs to resume named runs
still training as if they could be resumed now: they are marked with their holder.

Looking takes no lock where the lock file names a process of this host that has ended (a
finished run's); else it takes the lock shared for microseconds, and a run starting then tries
its own again for a moment (:func:`take_run_lock`) rather than be refused as in use.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import time
from pathlib import Path

from distconv.files import LockTaken, hold_lock
from distconv.procfs import is_there
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

    Where the lock file names a process of this host that has ended (:func:`_ended`), the lock
    is free, known without taking it. Else the kernel alone knows (the file's words outlive
    their writer, a pid is reused, a host is another): the lock is tried, shared and without
    waiting, then let go at once; a run starting in ``root`` meanwhile tries again
    (:func:`take_run_lock`).
    """
    try:
        fd = os.open(os.path.join(root, LOCK), os.O_RDONLY)
    except OSError:  # none: no run ever took it; out of reach: no sign either way
        return None
    try:
        said = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if _ended(said):
            return None
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


#: a lock's holder as :func:`~distconv.files.hold_lock` writes it
_HOLDER = re.compile(r"pid ([0-9]+) on (.+)")


def _ended(said: str) -> bool:
    """Whether ``said`` (a lock file's ``pid N on HOST``) names a process of this host that has
    ended; False where it may live (or is of another host, or unreadable)."""
    found = _HOLDER.fullmatch(said)
    if found is None or found[2] != socket.gethostname() or int(found[1]) == 0:
        return False
    try:
        return not is_there(int(found[1]))
    except OverflowError:  # no such pid at all: not known to have ended
        return False


#: how often, and how far apart, a run tries its lock before it is refused as in use: a
#: hint's look (:func:`lock_holder`) holds it for microseconds
TRIES, APART_S = 5, 0.02


def take_run_lock(path: Path) -> int:
    """:func:`~distconv.files.hold_lock` of a run's lock at ``path``, tried :data:`TRIES`
    times :data:`APART_S` apart: another process listing runs to resume looks at the lock by
    taking it shared, and a run starting at that moment was refused as in use (naming the
    lock's last holder, long gone).

    Raises:
        LockTaken: another process holds it at each try.
        OSError: as :func:`~distconv.files.hold_lock` does.
    """
    for _ in range(TRIES - 1):
        try:
            return hold_lock(path)
        except LockTaken:
            time.sleep(APART_S)
    return hold_lock(path)
