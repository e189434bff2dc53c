"""The other processes that hold a FIFO open to read (part of ``distconv check-manifests``,
:mod:`distconv.deploy.check_command`): a FIFO named as a file that another process reads
gives what a writer sends to either reader (the manifests read in part), and one held open
both ways (``exec 3<>fifo``) looks like a writer that never ends, so the check refuses it at
once, naming them. Read from ``/proc`` (Linux); elsewhere, or for the processes of other
users, none is found. A process that started this one (``timeout``, ``uv run``, a shell)
and holds the FIFO to read only, as the ``< fifo`` it handed down as ``/dev/stdin``, waits
for this one and reads nothing: it is not one, nor is a process that descends from it and
got the FIFO from it (``bash ci.sh < fifo`` hands it to each ``<(...)`` in ``ci.sh``). Nor
is any holder of an anonymous pipe (``<(render)``, a pipe on ``/dev/stdin``): no process can
open one by name, so its other holders got it by inheritance and read nothing (bash hands
the second ``<(...)`` of a command the first's pipe). The look cannot tell holding from
reading: a reader such a process starts is missed, as is one that opens the FIFO after the
look, and the FIFO is then read as before. This process itself is looked at for a
descriptor it was handed open to write, which would keep the FIFO open for ever.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

#: where the processes are listed, each ``<pid>/fd/<n>`` a link to what descriptor n holds
_PROC = "/proc"


def why_held(fd: int) -> str | None:
    """Why the FIFO this process reads on descriptor ``fd`` is refused at once: another
    process holds it open to read (:func:`other_readers`), or this process holds it open to
    write on a descriptor it was handed (``exec 3<>fifo; exec distconv ...``), so no writer's
    close ever ends it. None where neither is found."""
    if readers := other_readers(fd):
        return f"{_HELD} ({'; '.join(readers)}): a writer's bytes could go to it"
    return own_writers(fd)


def own_writers(fd: int) -> str | None:
    """Why the FIFO or pipe this process reads on descriptor ``fd`` (stdin too) would be read
    for ever: this process holds it open to write on another descriptor it was handed
    (``exec 3<>fifo; exec distconv check-manifests - < fifo``), so no writer's close ever ends
    it. None where it does not, or ``fd`` is no FIFO."""
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        return None
    target, pid = _identity(fd), os.getpid()
    own = _descriptors(pid, target)
    if writes := [n for n in own if n != str(fd) and _handed_down(pid, n) in _WRITING]:
        return f"a FIFO this check holds open to write too (fd {', '.join(writes)}): {_ENDLESS}"
    return None


def stream_writers(stream: object) -> str | None:
    """:func:`own_writers` of the descriptor of ``stream`` (``sys.stdin``); None where it has
    none (an in-memory stdin)."""
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return own_writers(fd)


#: why a FIFO another process reads is refused
_HELD = "a FIFO another process holds open to read"
#: why a FIFO this process was handed open to write is refused
_ENDLESS = "it would be read for ever, a writer's close never ending it"
#: the access modes (``O_ACCMODE`` of the open flags) a descriptor writes a FIFO with
_WRITING = (os.O_WRONLY, os.O_RDWR)


def other_readers(fd: int) -> list[str]:
    """The processes other than this one that hold the FIFO this one reads on descriptor
    ``fd`` open to read (alone or both ways; a writer is not one), by whatever name (a hard
    link, a bind mount; not another FIFO of its name, in another mount namespace; before Linux
    5.14, by its path only: see :class:`_Target`), each as ``pid 1234, cat``, in pid order,
    told from ``/proc`` text alone, never from the file's own file system. A process
    that exits while it is looked at is skipped, and so is one that holds it to read only and
    is one of this process's ancestors (it waits for this one: see the module) or descends
    from one that handed it down so (see :func:`_handing`). None for an anonymous pipe, whose
    other holders inherited it and read nothing (see the module)."""
    if _anonymous(fd):
        return []
    target, me = _identity(fd), os.getpid()
    try:
        pids = sorted(int(entry) for entry in os.listdir(_PROC) if entry.isdigit())
    except OSError:  # no /proc: nothing to name
        return []
    held = {pid: modes for pid in pids if pid != me and (modes := _modes(pid, target))}
    ancestors = _ancestors(me)
    handing = _handing(fd, target, {pid: held[pid] for pid in ancestors if pid in held})
    return [
        _named(pid)
        for pid, modes in held.items()
        if os.O_RDWR in modes
        or (
            os.O_RDONLY in modes
            and pid not in ancestors
            and not handing.intersection(_ancestors(pid))
        )
    ]


def _handing(fd: int, target: _Target | None, ancestors: dict[int, set[int]]) -> set[int]:
    """The processes that hand ``target`` (:func:`_identity`) down to read only: this
    process's ``ancestors`` that hold it so (their access modes given), and this one where it
    was handed it so on a descriptor other than ``fd``. A process that descends from one got
    it from that one by inheritance (``bash ci.sh < fifo`` hands it to each ``<(...)`` of
    ``ci.sh``, and to the check), where it waits for what it started, and reads nothing."""
    handing = {pid for pid, modes in ancestors.items() if os.O_RDWR not in modes}
    me = os.getpid()
    own = _descriptors(me, target)
    if any(n != str(fd) and _handed_down(me, n) == os.O_RDONLY for n in own):
        handing.add(me)
    return handing


def _anonymous(fd: int) -> bool:
    """Whether this process's descriptor ``fd`` holds an anonymous pipe, not a FIFO with a
    name: it is on the file system every pipe is on."""
    read, write = os.pipe()
    try:
        return os.fstat(read).st_dev == os.fstat(fd).st_dev
    finally:
        os.close(read)
        os.close(write)


def _modes(pid: int, target: _Target | None) -> set[int]:
    """The access modes (``O_RDONLY``, ``O_WRONLY``, ``O_RDWR``) of the descriptors process
    ``pid`` holds ``target`` (:func:`_identity`) open on: none where it holds none."""
    modes = {_mode(pid, fd) for fd in _descriptors(pid, target)}
    return {mode for mode in modes if mode is not None}


def _descriptors(pid: int, target: _Target | None) -> list[str]:
    """The descriptors (numbers, as named in ``/proc``) process ``pid`` holds ``target``
    (:func:`_identity`) open on; none where it is gone, or another user's."""
    if target is None:  # this process's own cannot be read: nothing to compare with
        return []
    try:
        with os.scandir(f"{_PROC}/{pid}/fd") as fds:
            return [fd.name for fd in fds if _identity(fd.name, pid, target.inode) == target]
    except OSError:
        return []


class _Target(NamedTuple):
    """What a descriptor holds, whatever its name, told from ``/proc`` text alone: a ``stat``
    of another process's descriptor reaches its file system, and one whose server is gone
    (FUSE, NFS) hangs it for ever, where the descriptor only shares the FIFO's inode
    number, or is any file (a kernel before 5.14, whose ``fdinfo`` gives no ``ino``)."""

    #: the device of its file system (``major:minor`` of its mount in ``mountinfo``)
    device: str | None
    #: its inode number (``ino`` in ``fdinfo``, Linux 5.14 on); where not given, the text
    #: of its link (its path as its process sees it, a bind mount's or a hard link's missed)
    inode: str | None


def _identity(fd: int | str, pid: int | None = None, inode: str | None = None) -> _Target | None:
    """What descriptor ``fd`` of process ``pid`` (this one where None) holds
    (:class:`_Target`); None where it is gone, or where ``inode`` is given and it holds
    another (its mount then not looked up: one look at ``mountinfo`` each FIFO's holder)."""
    where = f"{_PROC}/{'self' if pid is None else pid}"
    try:
        with open(f"{where}/fdinfo/{fd}", encoding="ascii") as info:
            fields = dict(line.split(":", 1) for line in info if ":" in line)
        held = fields["ino"].strip() if "ino" in fields else os.readlink(f"{where}/fd/{fd}")
        if inode is not None and held != inode:
            return None
        return _Target(_mount_device(where, fields["mnt_id"].strip()), held)
    except (OSError, KeyError, ValueError):
        return None


def _mount_device(where: str, mount: str) -> str | None:
    """The device (``major:minor``) of mount ``mount`` (its id) as process ``where`` sees it
    (``mountinfo``), None where it is none of them (a pipe's)."""
    with open(f"{where}/mountinfo", encoding="utf-8", errors="replace") as mounts:
        return next((f[2] for line in mounts if (f := line.split())[:1] == [mount]), None)


def _mode(pid: int, fd: str) -> int | None:
    """The access mode descriptor ``fd`` of process ``pid`` was opened with (``O_RDONLY``,
    ``O_WRONLY`` or ``O_RDWR``); None where that is gone."""
    flags = _flags(pid, fd)
    return None if flags is None else flags & os.O_ACCMODE


def _flags(pid: int, fd: str) -> int | None:
    """The flags of descriptor ``fd`` of process ``pid`` (``flags`` in ``fdinfo``); None where
    that is gone."""
    return _fdinfo(pid, fd, "flags", 8)


def _fdinfo(pid: int, fd: str, field: str, base: int) -> int | None:
    """The number ``field`` of ``/proc/PID/fdinfo/FD`` (written in ``base``), None where it is
    gone or not given."""
    try:
        with open(f"{_PROC}/{pid}/fdinfo/{fd}", encoding="ascii") as info:
            line = next(line for line in info if line.startswith(f"{field}:"))
        return int(line.split()[1], base)
    except (OSError, StopIteration, IndexError, ValueError):
        return None


def _handed_down(pid: int, fd: str) -> int | None:
    """The access mode of descriptor ``fd`` of process ``pid`` (:func:`_mode`) where it was
    handed down to it (not close-on-exec, as a shell's ``3<>fifo``), None where not: this
    process opens its own close-on-exec (PEP 446), such as a thread's writer."""
    flags = _flags(pid, fd)
    return None if flags is None or flags & os.O_CLOEXEC else flags & os.O_ACCMODE


def _ancestors(pid: int) -> set[int]:
    """The ids of the processes that started process ``pid``, its parent's parent and so on
    (from ``/proc/PID/stat``; the chain ends where one cannot be read)."""
    found = set()
    while (pid := _parent(pid)) is not None and pid > 0 and pid not in found:
        found.add(pid)
    return found


def _parent(pid: int) -> int | None:
    """The id of process ``pid``'s parent (``PPid`` of ``/proc/PID/stat``), None where gone."""
    try:
        with open(f"{_PROC}/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])  # after "pid (comm) state"
    except (OSError, IndexError, ValueError):
        return None


def _named(pid: int) -> str:
    """``pid 1234, cat``: the process by its id and its command's name, where still known."""
    try:
        with open(f"{_PROC}/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return f"pid {pid}, {comm.read().strip()}"
    except OSError:
        return f"pid {pid}"
