"""The processes mpiexec (the ``mpi`` launch's child) started that left its process group:
the launcher's signals to the group miss them, so they outlived the job. A worker's or a
shard's (``local``) are not looked for: what leaves its group is out of the launcher's reach,
as the docs say, and a helper of its own meant to finish by itself (an upload started in a
session of its own) got a SIGKILL, and no SIGTERM, at each stop (:class:`ChildGroup`'s
``strays``, :mod:`launcher.process_group`).

MPICH's Hydra and Open MPI start their ``ssh`` to each other host in a session of its own
(``sid == pid``): a stop of ``mpiexec`` (the launcher's SIGTERM, a failure, the grace's end)
killed its group, and an ``ssh`` to a host that never answers ran on for good. While the child
runs, such a process is its descendant (:func:`distconv.procfs.descendants`); once the child
has ended, it is init's, and no look finds it. So each signal to a running child's group first
looks for its descendants outside the group (:meth:`Strays.look`) and holds each by a pidfd (a
later process given its pid is never signalled); the stop's end, its SIGKILL of the group,
kills those still running (:meth:`Strays.kill`).

Only the SIGKILL reaches them, not the stop's SIGTERM: Hydra's own proxies and the ranks under
them are such processes too (each proxy in a session of its own), and mpiexec stops them in its
own order (a rank's SIGTERM forwarded, its checkpoint written, then the proxy's end); what is
left once mpiexec has ended, or at the grace's end, is what nothing else would stop (on
this host a rank's own helper in a session of its own, still running then, too).
"""

from __future__ import annotations

import os
import signal

from distconv.procfs import descendants, has_ended, pidfd, process_stat


class Strays:
    """A child's descendants found outside its process group, each ``(pid, start time)``
    with its pidfd (None where none opens: signalled by pid, after a look at its start)."""

    def __init__(self) -> None:
        self._found: dict[tuple[int, str], int | None] = {}

    def look(self, group: int) -> None:
        """Note the live descendants of the process ``group`` (the child, its group's leader,
        still running) that are in another process group than ``group``."""
        for pid, their_group, start in descendants(group):
            if their_group == group or (pid, start) in self._found:
                continue
            handle = pidfd(pid)
            if not _same(pid, start):  # ended since the look: the pidfd may be another's
                if handle is not None:
                    os.close(handle)
                continue
            self._found[(pid, start)] = handle

    def kill(self) -> None:
        """SIGKILL each found process that is still there."""
        for (pid, start), handle in self._found.items():
            try:
                if handle is not None:
                    signal.pidfd_send_signal(handle, signal.SIGKILL)
                elif _same(pid, start):
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):  # gone, or became another user's
                pass

    def close(self) -> None:
        """Let the found processes go (their pidfds closed); none is signalled after this."""
        for handle in self._found.values():
            if handle is not None:
                os.close(handle)
        self._found.clear()


def _same(pid: int, start: str) -> bool:
    """Whether the process that started at ``start`` still runs on ``pid`` (not a zombie)."""
    try:
        return not has_ended(process_stat(pid), start)
    except OSError:  # there, but not readable now: not known to be the same, never signalled
        return False
