"""Linux's ``/proc``: the fields of a process's ``stat`` file, and who a process is.

Three parts read it: the launcher, for which process groups still run a process that is no
zombie (:func:`launcher.child.running_groups`) and which processes a child started that left
its group (:func:`descendants`, :mod:`launcher.strays`); the parameter server, for whether a worker
or shard beside it has ended (:mod:`distconv.sync.ps.processes`); and a process the launcher
started through a script, for whether the launcher still runs (:mod:`distconv.launch_env`).
A process is named by :func:`process_identity`, which a later process with its pid does not
share.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

#: ``/proc/<pid>/stat`` states of a process that has ended (zombie, dead)
ENDED_STATES = ("Z", "X", "x")
#: the pid of a :func:`process_identity` another process wrote: ASCII digits, no more than any
#: pid_max allows (int() would take other digits, and fail on some of them, or on thousands)
PID_TEXT = re.compile(r"[0-9]{1,10}")


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name: ``[state, ppid, pgrp, ...]``
    (field ``n`` of proc(5) is item ``n - 3``); None when there is no such process.

    Raises:
        OSError: the file is there but cannot be read now (no file descriptor left, hidepid,
            permissions): that says nothing of whether the process runs.
    """
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: it ended while being read
        return None
    # "pid (comm) state ...": the command name may hold spaces and parentheses, so the fields
    # start after the last ')'. Bytes: a name that is no UTF-8 (an executable's, prctl's) made
    # read_text() raise UnicodeDecodeError, and any such process on the host stopped the
    # launcher's look at its process groups; the fields after it are ASCII
    return data[data.rfind(b")") + 2 :].decode("ascii", "replace").split()


def process_identity() -> str:
    """This process as ``"<boot id> <PID namespace> <pid> <start time>"``; empty where
    ``/proc`` does not tell (not Linux)."""
    where = pid_namespace()
    pid = os.getpid()
    try:
        stat = process_stat(pid)
    except OSError:
        return ""
    if where is None or stat is None:
        return ""
    return f"{where[0]} {where[1]} {pid} {stat[1]}"


def pid_namespace() -> tuple[str, str] | None:
    """This boot's id and this process's PID namespace, or None without ``/proc``, or where
    ``/proc`` is that of another PID namespace (``unshare --pid`` without ``--mount-proc``):
    its ``/proc/<pid>`` is then some other process than this namespace's ``<pid>``."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):
            return None
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return boot, os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def process_stat(pid: int) -> tuple[str, str] | None:
    """``(state, start time)`` of process ``pid``, or None when there is no such process.

    Raises:
        OSError: the file is there but cannot be read now (:func:`~distconv.procfs.stat_fields`).
    """
    fields = stat_fields(pid)
    # the start time is proc(5)'s field 22
    return (fields[0], fields[19]) if fields is not None and len(fields) > 19 else None


def has_ended(stat: tuple[str, str] | None, start: str) -> bool:
    """Whether the process that started at ``start`` has ended, from its pid's
    :func:`process_stat`: no process there, another one (started later) on its pid, or it is
    a zombie."""
    return stat is None or stat[1] != start or stat[0] in ENDED_STATES


def is_there(pid: int) -> bool:
    """Whether a process ``pid`` exists, as ``kill(pid, 0)`` says: one that ``/proc`` stopped
    showing after it was seen (remounted ``hidepid=2``, or the reader gave up its user or
    capabilities) runs all the same, and its missing entry is no end."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: there, another user's
        return True
    return True


def pidfd(pid: int) -> int | None:
    """A pidfd on the process on ``pid`` (close-on-exec); None where none opens: no process
    there, a thread's pid, a kernel before Linux 5.3, not Linux."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def descendants(pid: int) -> list[tuple[int, int, str]]:
    """``(pid, process group, start time)`` of each live descendant of process ``pid`` (not
    zombies), read from each one's ``/proc/<pid>/task/*/children`` down the tree (a look at
    every ``/proc/<pid>/stat`` where the kernel has no such files); empty without ``/proc``.
    A process whose parent ended before the look is init's (or a subreaper's) by then: not
    found, nor one started or ended during it (the kernel's lists are not frozen), nor one
    whose ``stat`` names another parent: a child listed that ended and was reaped before that
    read, its pid given to another process, which is no descendant."""
    tree = _children if _CHILDREN_FILES else _scan_children()
    found, below = [], [pid]
    while below:
        parent = below.pop()
        for child in tree(parent):
            try:
                fields = stat_fields(child)
            except OSError:  # not readable now: not known to be one
                continue
            if fields is None or len(fields) <= 19 or fields[0] in ENDED_STATES:
                continue
            if int(fields[1]) != parent:  # the pid is another's now (or it was reparented)
                continue
            found.append((child, int(fields[2]), fields[19]))
            below.append(child)
    return found


#: whether this kernel lists each task's children (``CONFIG_PROC_CHILDREN``, Linux 4.2 on)
_CHILDREN_FILES = Path(f"/proc/self/task/{os.getpid()}/children").exists()


def _children(pid: int) -> list[int]:
    """The children of process ``pid``, from each of its threads' ``children`` file."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # gone, or not readable now
        return []
    found = []
    for task in tasks:
        try:
            found += [
                int(child)
                for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            ]
        except OSError:  # the thread ended
            continue
    return found


def _scan_children() -> Callable[[int], list[int]]:
    """The children of each process, from one look at every ``/proc/<pid>/stat``."""
    tree: dict[int, list[int]] = {}
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        entries = []
    for entry in entries:
        try:
            fields = stat_fields(entry)
        except OSError:
            continue
        if fields is not None and len(fields) > 1:
            tree.setdefault(int(fields[1]), []).append(int(entry))
    return lambda pid: tree.get(pid, [])
