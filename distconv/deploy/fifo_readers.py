"""The other processes that hold a FIFO open to read (part of ``distconv check-manifests``,
:mod:`distconv.deploy.check_command`): a FIFO named as a file that another process reads
gives what a writer sends to either reader (the manifests read in part), and one held open
both ways (``exec 3<>fifo``) looks like a writer that never ends, so the check refuses it at
once, naming them. Read from ``/proc`` (Linux); elsewhere, or for the processes of other
users, none is found. A process that started this one (``timeout``, ``uv run``, a shell)
and holds the FIFO to read only, as the ``< fifo`` it handed down as ``/dev/stdin``, waits
for this one and reads nothing: it is not one. This process itself is looked at for a
descriptor it was handed open to write, which would keep the FIFO open for ever.
"""

from __future__ import annotations

import os

#: where the processes are listed, each ``<pid>/fd/<n>`` a link to what descriptor n holds
_PROC = "/proc"


def why_held(path: str, fd: int) -> str | None:
    """Why the FIFO at ``path``, which this process reads on descriptor ``fd``, is refused at
    once: another process holds it open to read (:func:`other_readers`), or this process
    holds it open to write on a descriptor it was handed (``exec 3<>fifo; exec distconv
    ...``), so no writer's close ever ends it. None where neither is found."""
    target = os.path.realpath(path)
    if readers := other_readers(path):
        return f"{_HELD} ({'; '.join(readers)}): a writer's bytes could go to it"
    own, pid = _descriptors(os.getpid(), target), os.getpid()
    if writes := [n for n in own if n != str(fd) and _handed_down(pid, n) in _WRITING]:
        return f"a FIFO this check holds open to write too (fd {', '.join(writes)}): {_ENDLESS}"
    return None


#: why a FIFO another process reads is refused
_HELD = "a FIFO another process holds open to read"
#: why a FIFO this process was handed open to write is refused
_ENDLESS = "it would be read for ever, a writer's close never ending it"
#: the access modes (``O_ACCMODE`` of the open flags) a descriptor writes a FIFO with
_WRITING = (os.O_WRONLY, os.O_RDWR)


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
    return any(_mode(pid, fd) in modes for fd in _descriptors(pid, target))


def _descriptors(pid: int, target: str) -> list[str]:
    """The descriptors (numbers, as named in ``/proc``) process ``pid`` holds ``target`` (an
    absolute path) open on; none where it is gone, or another user's."""
    try:
        with os.scandir(f"{_PROC}/{pid}/fd") as fds:
            return [fd.name for fd in fds if _link(fd.path) == target]
    except OSError:
        return []


def _mode(pid: int, fd: str) -> int | None:
    """The access mode descriptor ``fd`` of process ``pid`` was opened with (``O_RDONLY``,
    ``O_WRONLY`` or ``O_RDWR``); None where that is gone."""
    flags = _flags(pid, fd)
    return None if flags is None else flags & os.O_ACCMODE


def _flags(pid: int, fd: str) -> int | None:
    """The flags of descriptor ``fd`` of process ``pid`` (``flags`` in ``fdinfo``, octal); None
    where that is gone."""
    try:
        with open(f"{_PROC}/{pid}/fdinfo/{fd}", encoding="ascii") as info:
            return int(next(line for line in info if line.startswith("flags:")).split()[1], 8)
    except (OSError, StopIteration, IndexError, ValueError):
        return None


def _handed_down(pid: int, fd: str) -> int | None:
    """The access mode of descriptor ``fd`` of process ``pid`` (:func:`_mode`) where it was
    handed down to it (not close-on-exec, as a shell's ``3<>fifo``), None where not: this
    process opens its own close-on-exec (PEP 446), such as a thread's writer."""
    flags = _flags(pid, fd)
    return None if flags is None or flags & os.O_CLOEXEC else flags & os.O_ACCMODE


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
