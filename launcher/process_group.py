"""The operating system's side of a launched child: the signal it gets when the launcher dies,
its process group's signals (:class:`ChildGroup`), and which process groups still have a
running process (:mod:`launcher.child`)."""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import signal
import sys
from collections.abc import Callable, Sequence

from distconv.procfs import stat_fields

from .interrupt import STOP_SIGNALS
from .strays import Strays

_PR_SET_PDEATHSIG = 1


def parent_death_signal() -> Callable[[], None]:
    """A ``preexec_fn`` that gives the child the stop signals again, which the launcher's
    threads block (:func:`launcher.arrivals.deaf`): the child inherits the mask of the thread
    that starts it, and keeps it through exec. On Linux it also asks the kernel to SIGTERM the
    child when its parent dies; where that cannot be asked for (not Linux, or no libc that
    ctypes finds), the children kept the block, a stop's SIGTERM pending in them till the
    grace's SIGKILL.

    Everything is looked up here, in the parent: between fork and exec the child only calls
    the prepared function (the launcher has threads, so the child may not take their locks).
    """
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
        except (OSError, AttributeError):
            pass
    parent = os.getpid()

    def preexec() -> None:
        # first: a signal the child takes before exec (a Ctrl-C to the launcher's group, come
        # as it forked, held by the block below) runs the launcher's handler, whose C half
        # wrote it to the launcher's wakeup pipe, open here till exec: read there as the
        # launcher's own, a second one (launcher.arrivals)
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:  # not this process's main thread: nothing can be set
            pass
        # the stop signals the launcher's threads start blocked to (launcher.arrivals.deaf),
        # inherited from the thread that started this child: its own again
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        if prctl is None:
            return
        # until exec the child keeps the launcher's Python handler (the supervisor's, which
        # only records a signal): the death signal must end it, not be recorded and dropped
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM.value, 0, 0, 0)
        if os.getppid() != parent:  # the launcher died before the prctl took hold
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


#: what a :func:`watched` command runs first: its stdin, the pipe, kept as fd 3 (stdin is
#: /dev/null from here), a watchdog started beside it, then the program in the shell's place
#: (fd 3 closed). The watchdog reads fd 3 till its end of file and kills the whole process
#: group; its output goes nowhere, as it would hold the program's pipes open
_WATCHDOG = 'exec 3<&0 </dev/null; (read _ <&3; kill -s KILL 0) >/dev/null 2>&1 & exec "$@" 3<&-'


def watched(argv: Sequence[str]) -> tuple[list[str], int, int]:
    """``argv`` as a command whose process group dies with the launcher, for a child started
    in a session of its own (``start_new_session``) with the returned ``read`` end of a pipe
    as its stdin: a watchdog in its group kills the whole group at the end of file of that
    pipe, whose ``write`` end only the launcher holds, open till it is done with the child.
    Its death, however it comes, closes it: a SIGKILL of the launcher or of its own process
    group (``timeout -s KILL``, a batch system's killpg), which reaches no group of the
    child's own, and ``PR_SET_PDEATHSIG`` would end the child alone, not what it started.
    The program's own stdin is /dev/null; one that cannot be started is the shell's 126 or
    127, not an OSError.

    Returns:
        the command (``/bin/sh -c``), the read end (the child's stdin, closed by the caller
        once it started) and the write end (closed by the caller: the group's end).
    """
    read, write = (_above_std_streams(end) for end in os.pipe())
    return ["/bin/sh", "-c", _WATCHDOG, argv[0], *argv], read, write


def _above_std_streams(fd: int) -> int:
    """``fd`` moved to 3 or above (close-on-exec, the low one closed): a launcher started with
    its stdout and stderr closed (``>&- 2>&-``) got the pipe as fds 1 and 2, and a write to its
    "stderr" (a C library's warning) reached the watchdog, which killed pyenv's group at once."""
    if fd > 2:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


def running_groups() -> set[int] | None:
    """The process groups that have a process which is not a zombie (None without /proc)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    groups = set()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            fields = stat_fields(entry)
        except OSError:
            continue
        if fields is not None and len(fields) > 2 and fields[0] != "Z":  # None: gone meanwhile
            groups.add(int(fields[2]))
    return groups


def signal_group(group: int, signum: int) -> None:
    """Send ``signum`` to the process group ``group``; nothing where the whole group is gone
    already (or its one member left is another user's)."""
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):
        pass


def group_has_member(group: int) -> bool:
    """Whether the process group ``group`` has a member, a zombie too, as the kernel says
    (``killpg(group, 0)``): a member that changed its user counts."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member that changed its user: still there
        return True
    return True


class ChildGroup:
    """A child's process group, which the child (``leader``) leads: signalled as a whole, and
    watched once the leader has exited (:meth:`launcher.child.Child.group_alive`); and, with
    ``strays`` (mpiexec's group), the processes the leader started that left the group
    (:class:`~launcher.strays.Strays`: its ``ssh``, Hydra's proxies and ranks), killed with it.
    Without it what left the group is out of reach, as the docs say of a worker's or a shard's
    (a helper of its own in a session of its own, meant to finish by itself)."""

    def __init__(self, leader: int, strays: bool = False) -> None:
        self.leader = leader
        #: the exited leader left unreaped, a zombie (:meth:`launcher.child.Child._wait`)
        self.leader_kept = False
        #: the leader's descendants outside the group, found while it ran; None: not looked for
        self.strays = Strays() if strays else None

    def signal(self, signum: int, leader_runs: bool = False) -> None:
        """Send ``signum`` to the group, if any of it is left (:func:`signal_group`). Where
        strays are looked for and ``leader_runs``, its descendants outside the group are
        looked for first; a SIGKILL kills those found, now or at an earlier signal, still
        running."""
        if self.strays is not None and leader_runs:
            self.strays.look(self.leader)
        if self.strays is not None and signum == signal.SIGKILL:
            self.strays.kill()
        signal_group(self.leader, signum)

    def close(self) -> None:
        """Let the strays go (:meth:`Strays.close`): the child is done with."""
        if self.strays is not None:
            self.strays.close()

    def alive(self, running: set[int] | None) -> bool:
        """Whether a process of the group still runs, its leader exited, given ``running``:
        :func:`running_groups` (zombies do not count, such as the leader left unreaped;
        None, without /proc: any member, as the kernel says)."""
        if running is not None:
            return self.leader in running
        if self.leader_kept:  # no /proc, and the zombie leader would always answer killpg
            return False  # (Linux without /proc mounted): the group is known by its leader
        return group_has_member(self.leader)  # no /proc (macOS, the leader reaped at once)
