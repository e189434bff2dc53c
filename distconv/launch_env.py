"""Which launch and which restart of a job this process is, and whether its launcher runs.

The launcher gives every process it starts ``DISTCONV_LAUNCH`` (a token, one per invocation
of the launcher, the same over its restarts) and ``DISTCONV_RESTART`` (how many times it has
started the job again). A run's record (:mod:`distconv.resume`), the logs and the probes
read them here; a process started by hand has neither, and is a first start.

A local launch also says which process the launcher is (``DISTCONV_LAUNCHER``, its
:func:`~distconv.procfs.process_identity`). The kernel SIGTERMs the launcher's own children
when it dies, even of SIGKILL, but not their children: a ``distconv train`` that a wrapper
script started trained on, orphaned, after its launcher was killed. Such a process follows
the launcher itself (:func:`stop_with_launcher`), and stops as at the launcher's SIGTERM.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Mapping

from distconv.procfs import PID_TEXT, has_ended, is_there, pid_namespace, process_stat
from distconv.runtime import RuntimeConfigError

ENV_RESTART = "DISTCONV_RESTART"
ENV_LAUNCH = "DISTCONV_LAUNCH"
ENV_LAUNCHER = "DISTCONV_LAUNCHER"
#: seconds between two looks at the launcher's process (a read of its /proc stat)
LAUNCHER_LOOK_EVERY = 1.0

log = logging.getLogger("distconv.launch_env")
_following: threading.Thread | None = None  # the thread that follows the launcher, once started


def restart_count(environ: Mapping[str, str] | None = None) -> int:
    """How many times the launcher has started this job again (``DISTCONV_RESTART``; 0 where
    it is not set, as on a job's first start).

    Raises:
        RuntimeConfigError: it is not an integer >= 0 (a negative count was logged and
            recorded as it came).
    """
    env = os.environ if environ is None else environ
    text = env.get(ENV_RESTART, "0")
    try:
        count = int(text.strip())
    except ValueError:
        count = -1
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

    Only a process the launcher did not start itself follows it (one started by a script it
    started): the kernel tells its own children. A launcher of another boot or PID namespace,
    or a malformed value, is not followed; nor is one this process cannot see as the launcher
    named itself (:func:`_seen`). Returns the thread, or None where none follows.
    """
    global _following
    env = os.environ if environ is None else environ
    parts = env.get(ENV_LAUNCHER, "").split(" ")
    if len(parts) != 4 or not PID_TEXT.fullmatch(parts[2]) or tuple(parts[:2]) != pid_namespace():
        return None
    pid, start = int(parts[2]), parts[3]
    if os.getppid() == pid or _following is not None:  # init() then job.train(): one thread
        return None
    if not _seen(pid, start):
        log.warning(
            "cannot see the launcher (pid %d) from here (/proc hidepid, another user, another "
            "time namespace): not stopping with it",
            pid,
        )
        return None
    _following = threading.Thread(
        target=_follow, args=(pid, start), name="distconv-launcher-watch", daemon=True
    )
    _following.start()
    return _following


def _seen(pid: int, start: str) -> bool:
    """Whether the looks can tell when the launcher ends: a first look finds its process as it
    named itself, or no process ``pid`` at all (it has ended, and the first look says so).

    A process that is there but not as named is not followed, or every look would take it
    for ended while it runs: hidden by ``/proc``'s ``hidepid`` from a process of another user
    (``kill`` then says it is there), or shown with another start time to a process in
    another time namespace (``unshare --time``), whose boot time is offset. A process of
    this one's time namespace with another start time is a later one on the launcher's pid,
    and so is one of any user or namespace that began after this one: the launcher has
    ended, and it is followed (the first look stops this process).
    """
    try:
        stat = process_stat(pid)
    except OSError:  # there, but not readable now: the looks wait for news
        return True
    if stat is not None and stat[1] == start:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # EPERM: there, another user's; or no pid at all
        return stat is not None and _started_after_this(stat[1])
    # another start time on the pid: the launcher seen through another time namespace's clock,
    # or a later process on its pid (the launcher has ended, and the first look says so). Were
    # a process of this one's time namespace the launcher, this one would read the start time
    # the launcher wrote: so it is a later process, and the launcher ended before this one began
    return stat is not None and (_same_clock(pid) or _started_after_this(stat[1]))


def _started_after_this(start: str) -> bool:
    """Whether a process with ``/proc`` start time ``start`` began after this one: then it is
    not the launcher, which began before it started this one. ``/proc`` shows every start
    time on the reader's clock, its time namespace's or not, so the two compare where the
    start time the launcher wrote does not: a later process of another user or time
    namespace on the launcher's pid was taken for the launcher hidden, and not followed."""
    try:
        own = process_stat(os.getpid())
    except OSError:
        return False
    return own is not None and int(start) > int(own[1])


def _same_clock(pid: int) -> bool:
    """Whether process ``pid`` is in this process's time namespace; True on a kernel without
    time namespaces, False where ``pid``'s cannot be read (another user's)."""
    try:
        ours = os.readlink("/proc/self/ns/time")
    except FileNotFoundError:  # no time namespaces: one clock for all
        return True
    except OSError:
        return False
    try:
        return os.readlink(f"/proc/{pid}/ns/time") == ours
    except OSError:
        return False


def _follow(pid: int, start: str) -> None:
    while True:
        try:
            stat = process_stat(pid)
        except OSError:  # there, but not readable now: no news
            stat = ("S", start)
        if stat is None and is_there(pid):  # hidden since the first look: no news either
            stat = ("S", start)
        if has_ended(stat, start):
            log.warning("the launcher (pid %d) has ended: stopping as at its SIGTERM", pid)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        time.sleep(LAUNCHER_LOOK_EVERY)
