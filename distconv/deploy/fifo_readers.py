"""The other processes that hold a FIFO open to read (part of ``distconv check-manifests``,
:mod:`distconv.deploy.check_command`): a FIFO named as a file that another process reads
gives what a writer sends to either reader (the manifests read in part), and one held open
both ways (``exec 3<>fifo``) looks like a writer that never ends, so the check refuses it at
once, naming them. Read from ``/proc`` (Linux); elsewhere, or for the processes of other
users, none is found.
"""

from __future__ import annotations

import os

#: where the processes are listed, each ``<pid>/fd/<n>`` a link to what descriptor n holds
_PROC = "/proc"


def other_readers(path: str) -> list[str]:
    """The processes other than this one that hold the FIFO at ``path`` open to read (alone
    or both ways; a writer is not one), each as ``pid 1234, cat``, in pid order. A process
    that exits while it is looked at is skipped."""
    target = os.path.realpath(path)
    try:
        pids = sorted(int(entry) for entry in os.listdir(_PROC) if entry.isdigit())
    except OSError:  # no /proc: nothing to name
        return []
    return [_named(pid) for pid in pids if pid != os.getpid() and _holds(pid, target)]


def _holds(pid: int, target: str) -> bool:
    """Whether process ``pid`` has a descriptor open to read on ``target`` (an absolute path)."""
    try:
        with os.scandir(f"{_PROC}/{pid}/fd") as fds:
            return any(_link(fd.path) == target and _reads(pid, fd.name) for fd in fds)
    except OSError:  # gone, or another user's
        return False


def _reads(pid: int, fd: str) -> bool:
    """Whether descriptor ``fd`` of process ``pid`` was opened to read (``O_RDONLY`` or
    ``O_RDWR``: its ``flags`` in ``fdinfo``, octal); where that is gone, no."""
    try:
        with open(f"{_PROC}/{pid}/fdinfo/{fd}", encoding="ascii") as info:
            flags = next(line for line in info if line.startswith("flags:")).split()[1]
    except (OSError, StopIteration, IndexError):
        return False
    return int(flags, 8) & os.O_ACCMODE != os.O_WRONLY


def _link(path: str) -> str | None:
    """Where the descriptor link ``path`` points, or None where it is gone."""
    try:
        return os.readlink(path)
    except OSError:
        return None


def _named(pid: int) -> str:
    """``pid 1234, cat``: the process by its id and its command's name, where still known."""
    try:
        with open(f"{_PROC}/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return f"pid {pid}, {comm.read().strip()}"
    except OSError:
        return f"pid {pid}"
