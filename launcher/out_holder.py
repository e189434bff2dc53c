"""Whose process holds the output directory a rank was refused as in use: this launch's own,
or another job's.

A rank refused its ``--out`` as in use (``runs/x is in use by pid N on HOST (job J): that run
is still going; ...``: :func:`distconv.run_holder.in_use_refusal`) was restarted, because a
process of the attempt before may still hold the lock for a moment. Where another live job
holds it, every restart started the shards and workers again for nothing, and the first one
after that job ended took its directory: with ``--overwrite`` it deleted the finished run. So
the refusal is restarted only where its holder is this launch's own (:func:`held_by_another_job`
says otherwise), and :func:`distconv.refused_starts.start_refused_in` reads the words it adds to
the failure's cause as a refusal every attempt would meet.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Sequence

from distconv.launch_env import ENV_LAUNCH
from distconv.procfs import descendants
from distconv.refused_starts import ANOTHER_JOBS_RUN

#: a rank's in-use refusal (:func:`distconv.run_holder.in_use_refusal`'s words), read anywhere
#: in a line (behind ``NAME: error: ``, an error's class, an MPI rank's prefix): its holder's pid
#: and host (or ``another process``, a lock file without words), the job its claim names
IN_USE = re.compile(
    r"is in use by (?P<holder>pid (?P<pid>[0-9]+) on (?P<host>[^\s():]+)|another process)"
    r"(?: \(job (?P<job>[^()]*)\))?: that run is still going"
)

#: the pids of every process this launcher started (:func:`note_started`): a worker of an
#: attempt before that still holds the lock is one, though it is no descendant by then
_started: set[int] = set()


def note_started(pid: int) -> None:
    """Record ``pid`` as a process this launch started (:class:`launcher.child.Child`)."""
    _started.add(pid)


def held_by_another_job(
    lines: Sequence[str], job_id: str | None, launch: str | None = None
) -> str | None:
    """The cause to give a failure whose ``lines`` (its last line and cause) say its
    ``--out`` is in use by a process that is none of this launch's (job ``job_id``, launch
    token ``launch``): neither does the directory's claim name this job, nor is the holder a
    process of this host that this launcher started, one below it, or one whose environment
    names this launch (an MPI rank of an attempt before, its ``mpiexec`` gone). None where no
    line says so, or the holder is this launch's own: a restart may find the lock free then."""
    for line in reversed(lines):
        if (found := IN_USE.search(line)) is not None:
            if _own(found, job_id, launch):
                return None
            holder = found["holder"] + (f" (job {found['job']})" if found["job"] else "")
            return f"its output directory is in use by {holder}, {ANOTHER_JOBS_RUN}"
    return None


def _own(found: re.Match[str], job_id: str | None, launch: str | None) -> bool:
    """Whether the holder ``found`` names is this launch's: its claim names ``job_id``, or it
    is a process of this host that this launcher started, one below it, or one started with
    ``launch`` as its ``DISTCONV_LAUNCH``. A claim names the job that began the run, which a
    resume by another launch keeps: a rank of this launch's attempt before, orphaned by its
    ``mpiexec``'s end (Hydra puts each rank in a session of its own), is known by its
    environment alone."""
    if job_id is not None and found["job"] == job_id:
        return True
    if found["pid"] is None or found["host"] != socket.gethostname():
        return False
    pid = int(found["pid"])
    if pid in _started or any(below == pid for below, _, _ in descendants(os.getpid())):
        return True
    return launch is not None and _launch_of(pid) == launch


def _launch_of(pid: int) -> str | None:
    """The ``DISTCONV_LAUNCH`` that process ``pid`` was started with (``/proc/PID/environ``);
    None where it has none, or it cannot be read (ended, another user's, no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            entries = environ.read().split(b"\0")
    except OSError:
        return None
    prefix = f"{ENV_LAUNCH}=".encode()
    for entry in entries:
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None
