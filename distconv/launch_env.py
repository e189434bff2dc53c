"""Which launch and which restart of a job this process is, and whether its launcher runs.

The launcher gives every process it starts ``DISTCONV_LAUNCH`` (a token, one per invocation
of the launcher, the same over its restarts) and ``DISTCONV_RESTART`` (how many times it has
started the job again). A run's record (:mod:`distconv.resume`), the logs and the probes
read them here; a process started by hand has neither, and is a first start.

A local launch also says which process the launcher is (``DISTCONV_LAUNCHER``, its
:func:`~distconv.procfs.process_identity`). The kernel SIGTERMs the launcher's own children
when it dies, even of SIGKILL, but not their children: a ``distconv train`` that a wrapper
script started trained on, orphaned, after its launcher was killed. Such a process follows
the launcher itself (:func:`stop_with_launcher`), and stops as at the launcher's SIGTERM; so
does the launcher's own child, whose parent-death signal a change of user or group
(``setpriv``, ``gosu``) clears.

The launcher copies each child's output into ``<run-dir>/logs/<role>-<rank>.log`` (named in
``DISTCONV_LOG_FILE``); once it is gone, the child's stdout and stderr are pipes nobody
reads, and the lines of its stop (the checkpoint's step, why it stopped) reached no file. So a
child whose output leads nowhere appends it to that log itself (:func:`keep_lines_in_log`).
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from distconv.placement import INTEGER_TEXT
from distconv.procfs import (
    ENDED_STATES,
    PID_TEXT,
    has_ended,
    is_there,
    pid_namespace,
    pidfd,
    process_stat,
)
from distconv.runtime import RuntimeConfigError

ENV_RESTART = "DISTCONV_RESTART"
ENV_LAUNCH = "DISTCONV_LAUNCH"
ENV_LAUNCHER = "DISTCONV_LAUNCHER"
#: the log the launcher copies this process's output into: ``<run-dir>/logs/<role>-<rank>.log``
ENV_LOG_FILE = "DISTCONV_LOG_FILE"
#: seconds between two looks at the launcher's process (a read of its /proc stat)
LAUNCHER_LOOK_EVERY = 1.0

log = logging.getLogger("distconv.launch_env")
_following: threading.Thread | None = None  # the thread that follows the launcher, once started
#: the launcher's pid, where it was this process's parent as it began to follow it
_launcher_parent: int | None = None
#: the launcher's pid, once the thread that follows it saw it end
_launcher_ended: int | None = None


def restart_count(environ: Mapping[str, str] | None = None) -> int:
    """How many times the launcher has started this job again (``DISTCONV_RESTART``; 0 where
    it is not set, as on a job's first start).

    Raises:
        RuntimeConfigError: it is not an integer >= 0 (a negative count was logged and
            recorded as it came).
    """
    env = os.environ if environ is None else environ
    text = env.get(ENV_RESTART, "0")
    # int() also reads "1_0" as 10 and other scripts' digits: held to the rank variables' rule
    count = int(text) if INTEGER_TEXT.fullmatch(text) else -1
    if count < 0:
        raise RuntimeConfigError(f"{ENV_RESTART} must be an integer >= 0, got {text!r}")
    return count


def launch_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The token of the ``distconv-launch`` invocation that started this process
    (``DISTCONV_LAUNCH``), or None."""
    env = os.environ if environ is None else environ
    return env.get(ENV_LAUNCH) or None


def stop_with_launcher(environ: Mapping[str, str] | None = None) -> threading.Thread | None:
    """SIGTERM this process when the launcher that started it (``DISTCONV_LAUNCHER``) ends,
    from a daemon thread that looks at it every :data:`LAUNCHER_LOOK_EVERY` seconds.

    The launcher's own children follow it too: the kernel's SIGTERM at its death
    (``PR_SET_PDEATHSIG``) is cleared by a change of user or group between the launcher's
    fork and ``distconv train`` (``setpriv``, ``gosu``), and a parent on the launcher's pid
    may be a later process; the handler takes a second SIGTERM as the first. A launcher of
    another boot or PID namespace, or a malformed value, is not followed; nor is one ``/proc``
    hides from this process (``hidepid``, another user's). Returns the thread, or None where
    none follows.
    """
    global _following
    env = os.environ if environ is None else environ
    parts = env.get(ENV_LAUNCHER, "").split(" ")
    if len(parts) != 4 or not PID_TEXT.fullmatch(parts[2]) or tuple(parts[:2]) != pid_namespace():
        return None
    if not (parts[3].isascii() and parts[3].isdigit()):  # a start time: taken back by clocks
        return None
    pid, named_start = int(parts[2]), parts[3]
    _note_parent(pid)
    if _following is not None:  # init() then job.train(): one thread
        return None
    try:
        stat = process_stat(pid)
    except OSError:  # there, but not readable now: the thread's first look reads it
        stat = None
    else:
        if stat is None and is_there(pid):
            log.warning(
                "cannot see the launcher (pid %d) from here (/proc hidepid, another user): "
                "not stopping with it",
                pid,
            )
            return None
    _following = threading.Thread(
        target=_follow, args=(pid, named_start), name="distconv-launcher-watch", daemon=True
    )
    _following.start()
    return _following


def _note_parent(pid: int) -> None:
    """Note the launcher (``pid``) as this process's parent, where it is: the kernel's SIGTERM
    at its death (``PR_SET_PDEATHSIG``) then tells by the parent it leaves
    (:func:`ended_launcher`)."""
    global _launcher_parent
    if os.getppid() == pid:
        _launcher_parent = pid


def ended_launcher() -> int | None:
    """The pid of this process's launcher, where it has ended as far as this process can tell
    at once: the thread that follows it saw it end, or it was this process's parent and is no
    longer (the kernel gives an orphan its new parent before it sends the parent-death
    SIGTERM); else None. No ``/proc`` read: a SIGTERM's handler asks, so that the stop it ends
    in says the launcher died, not a scheduler's stop."""
    if _launcher_ended is not None:
        return _launcher_ended
    if _launcher_parent is not None and os.getppid() != _launcher_parent:
        return _launcher_parent
    return None


def _first_look(pid: int, named_start: str) -> str | None:
    """The start time of the process to follow as the launcher, on this process's clock, or
    None where the launcher has ended: no process on its pid, a zombie, one that began after
    this one (the launcher began before it started this one), or one whose start, taken back
    to the launcher's clock (:func:`_clock_gap`), is not the written one. Where the clocks'
    gap cannot be told, the process found is followed: if it is not the launcher, it took the
    pid before this process began, the launcher has ended, and following it stops this one
    late but never while the launcher runs.

    Raises:
        OSError: ``/proc`` cannot be read now: no news.
    """
    stat = process_stat(pid)
    if stat is None or stat[0] in ENDED_STATES or _began_after_this(stat[1]):
        return None
    gap = _clock_gap(pid)
    if gap is None:
        return stat[1]
    if gap == 0:  # one clock: the launcher reads as it wrote
        return stat[1] if stat[1] == named_start else None
    # each clock shows a start rounded down to a tick, so the launcher's two readings differ
    # by the gap within one tick (the written one read here is another process's)
    tick = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    off_by = _signed_ns(stat[1]) - _signed_ns(named_start) - gap
    return stat[1] if abs(off_by) < 2 * tick else None


def _began_after_this(start: str) -> bool:
    """Whether a process with ``/proc`` start time ``start`` began after this one (``/proc``
    shows every start time on the reader's clock, so the two compare)."""
    own = process_stat(os.getpid())
    return own is not None and _signed_ns(start) > _signed_ns(own[1])


def _signed_ns(start: str) -> int:
    """A ``/proc`` start time (clock ticks) in nanoseconds of the reader's clock, negative for
    a process that began before that clock's zero: in a time namespace whose boot-time offset
    is below minus the process's start, the kernel shows the sum wrapped to an unsigned 64-bit
    value, which read as is put a launcher that runs after this process and stopped it."""
    ns = int(start) * (1_000_000_000 // os.sysconf("SC_CLK_TCK"))
    # no start time that did not wrap reaches 2**63 ns: the kernel keeps a clock's offset and
    # value under KTIME_MAX / 2, and a wrapped one lies within an uptime of 2**64
    return ns - 2**64 if ns >= 2**63 else ns


def _clock_gap(pid: int) -> int | None:
    """This process's boot-time offset less that of process ``pid``'s time namespace, in
    nanoseconds: what this one reads a start time as, less what ``pid`` reads it as (``/proc``
    shows start times on the reader's clock, and the launcher wrote its own on its clock).
    0 in one namespace or on a kernel without them; None where it cannot be told."""
    try:
        ours = os.readlink("/proc/self/ns/time")
    except FileNotFoundError:  # no time namespaces: one clock for all
        return 0
    except OSError:
        return None
    try:
        theirs = os.readlink(f"/proc/{pid}/ns/time")
        if theirs == ours:
            return 0
        if os.readlink(f"/proc/{pid}/ns/time_for_children") != theirs:
            return None  # its offsets file shows its children's namespace, not its own
    except FileNotFoundError:  # gone: the next look says so
        return None
    except OSError:
        pass
    # the namespace link needs ptrace access, the offsets file does not: taking another user's
    # process for one of another clock, this one followed a process that took the launcher's
    # pid before it began, and trained on, orphaned, as long as that one ran. The file shows
    # the namespace a process's children get: its own, but between an unshare(CLONE_NEWTIME)
    # and the next exec, which the launcher never does, and the links tell for this process
    try:
        if os.readlink("/proc/self/ns/time_for_children") != ours:
            return None
        own, their = _boot_offset("self"), _boot_offset(str(pid))
    except OSError:
        return None
    return None if own is None or their is None else own - their


def _boot_offset(pid: str) -> int | None:
    """The boot-time offset, in nanoseconds, of process ``pid``'s (``self``'s) children's time
    namespace, from its ``timens_offsets``; None where the file has none.

    Raises:
        OSError: the file cannot be read.
    """
    for line in Path(f"/proc/{pid}/timens_offsets").read_text().splitlines():
        name, *offset = line.split()
        if name == "boottime" and len(offset) == 2:
            return int(offset[0]) * 1_000_000_000 + int(offset[1])
    return None


def _follow(pid: int, named_start: str) -> None:
    global _launcher_ended
    start: str | None = None  # of the process followed, once a first look has read it
    # opened after this process began, so whatever process holds the pid then, its end means
    # the launcher's: it is the launcher, or one that took its pid once it had ended. The
    # first look reads the same process while it runs (the pid is its), and past that look it
    # alone is followed: a later process on the pid, hidden by hidepid (kill(pid, 0) finds
    # it), was taken for the launcher hidden, and this one trained on as long as it ran
    handle = pidfd(pid)  # None: no process there (the first look says so)
    while True:
        try:
            if handle is not None and _has_exited(handle):
                ended = True
            elif start is None:
                start = _first_look(pid, named_start)
                ended = start is None
            else:
                ended = handle is None and _has_gone(pid, start)
        except OSError:  # there, but not readable now: no news
            ended = False
        if ended:
            keep_lines_in_log()  # first: this line and the stop's reach the log
            log.warning("the launcher (pid %d) has ended: stopping as at its SIGTERM", pid)
            _launcher_ended = pid  # before the SIGTERM, whose handler asks
            os.kill(os.getpid(), signal.SIGTERM)
            return
        time.sleep(LAUNCHER_LOOK_EVERY)


def _has_exited(handle: int) -> bool:
    """Whether the process of pidfd ``handle`` has ended (a zombie too): it reads as ready."""
    poller = select.poll()  # not select.select: a descriptor past 1023 is fine
    poller.register(handle, select.POLLIN)
    return bool(poller.poll(0))


def _has_gone(pid: int, start: str) -> bool:
    """Whether the process followed (``pid``, started at ``start``) has ended, where no pidfd
    follows it: gone, a zombie, or replaced on its pid. One ``/proc`` stopped showing after
    the first look (remounted ``hidepid``) runs all the same as long as ``kill`` finds it."""
    stat = process_stat(pid)
    if stat is None and is_there(pid):
        return False
    return has_ended(stat, start)


def keep_lines_in_log(environ: Mapping[str, str] | None = None) -> bool:
    """Point this process's stdout and stderr, where they are pipes whose reader is gone (the
    launcher died: SIGKILL, the OOM killer), at the log the launcher kept of them
    (``DISTCONV_LOG_FILE``), appending; returns whether it did. While the launcher reads them
    nothing changes, so no line reaches the log twice; lines written into the pipe between its
    death and this call are lost with it. A log that cannot be opened leaves them as they are.
    """
    env = os.environ if environ is None else environ
    path = env.get(ENV_LOG_FILE)
    broken = [fd for fd in (1, 2) if _reader_gone(fd)] if path else []
    if not broken:
        return False
    try:
        logged = os.open(path, os.O_WRONLY | os.O_APPEND)  # not created: the launcher's own
    except OSError:
        return False
    try:
        for fd in broken:
            os.dup2(logged, fd)  # Python's streams keep their fds: what they hold goes there
    finally:
        os.close(logged)
    return True


def _reader_gone(fd: int) -> bool:
    """Whether ``fd`` is the write end of a pipe whose every reader closed it (poll says
    POLLERR); False for a file, a terminal, a closed descriptor."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    try:
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except OSError:
        return False
