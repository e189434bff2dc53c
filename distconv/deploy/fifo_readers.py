"""The other processes that hold a FIFO open to read (part of ``distconv check-manifests``,
:mod:`distconv.deploy.check_command`): a FIFO named as a file that another process reads
gives what a writer sends to either reader (the manifests read in part), and one held open
both ways (``exec 3<>fifo``) looks like a writer that never ends, so the check refuses it at
once, naming them. Read from ``/proc`` (Linux); elsewhere, or for the processes of other
users, none is found. A process that started this one (``timeout``, ``uv run``, a shell)
and holds the FIFO to read only, as the ``< fifo`` it handed down as ``/dev/stdin``, waits
for this one and reads nothing: it is not one.
"""

from __future__ import annotations

import os

#: where the processes are listed, each ``<pid>/fd/<n>`` a link to what descriptor n holds
_PROC = "/proc"


def other_readers(path: str) -> list[str]:
    """The processes other than this one that hold the FIFO at ``path`` open to read (alone
    or both ways; a writer is not one), each as ``pid 1234, cat``, in pid order. A process
    that exits while it is looked at is skipped, and so is one of this process's ancestors
    that holds it to read only (it waits for this one: see the module)."""
    target = os.path.realpath(path)
    try:
        pids = sorted(int(entry) for entry in os.listdir(_PROC) if entry.isdigit())
    except OSError:  # no /proc: nothing to name
        return []
    ancestors = _ancestors()
    return [
        _named(pid)
        for pid in pids
        if pid != os.getpid()
        and _holds(pid, target, (os.O_RDWR,) if pid in ancestors else _READING)
    ]


#: the access modes (``O_ACCMODE`` of the open flags) a descriptor reads a FIFO with
_READING = (os.O_RDONLY, os.O_RDWR)


def _holds(pid: int, target: str, modes: tuple[int, ...]) -> bool:
    """Whether process ``pid`` has a descriptor open on ``target`` (an absolute path) with one
    of the access ``modes``."""
    try:
        with os.scandir(f"{_PROC}/{pid}/fd") as fds:
            return any(_link(fd.path) == target and _mode(pid, fd.name) in modes for fd in fds)
    except OSError:  # gone, or another user's
        return False


def _mode(pid: int, fd: str) -> int | None:
    """The access mode descriptor ``fd`` of process ``pid`` was opened with (``O_RDONLY``,
    ``O_WRONLY`` or ``O_RDWR``: its ``flags`` in ``fdinfo``, octal); None where that is gone."""
    try:
        with open(f"{_PROC}/{pid}/fdinfo/{fd}", encoding="ascii") as info:
            flags = next(line for line in info if line.startswith("flags:")).split()[1]
    except (OSError, StopIteration, IndexError):
        return None
    return int(flags, 8) & os.O_ACCMODE


def _ancestors() -> set[int]:
    """The ids of the processes that started this one, its parent's parent and so on (from
    ``/proc/PID/stat``; the chain ends where one cannot be read)."""
    found, pid = set(), os.getppid()
    while pid > 0 and pid not in found:
        found.add(pid)
        try:
            with open(f"{_PROC}/{pid}/stat", encoding="utf-8", errors="replace") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])  # after "pid (comm) state"
        except (OSError, IndexError, ValueError):
            break
    return found


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
