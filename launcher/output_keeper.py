"""A child's output that outlives the launcher: a small process of its own (the keeper) holds
the read end of the child's output pipe beside the launcher, reading nothing while the
launcher lives, and copies what comes after the launcher's death into the child's log.

For ``mpiexec``: once the launcher was killed outright (SIGKILL, the OOM killer), the first
line a rank printed killed ``mpiexec`` by SIGPIPE (or, with SIGPIPE ignored, by EPIPE), and
Hydra then SIGKILLed every rank, before ``MPI_Finalize`` (its ``/dev/shm`` file was left
behind, until the ranks unlinked it at their start) and now and then before the checkpoint of
the stop the kernel's SIGTERM asked for. With the keeper the pipe keeps a reader: the ranks
stop and checkpoint as at the launcher's own SIGTERM, and their last lines reach the log.
Nothing is read twice: the keeper reads only once the launcher is gone, and then the launcher's
pump reads nothing more (lines the pump had read but not yet written when it died are lost with
it, a part of one line at most).

The keeper ends at the pipe's end (every writer gone) once the launcher's pump has read all
the pipe held, or once the launcher has gone and it has copied the rest; it is started in a
session of its own (no terminal signal reaches it), with the standard library alone
(``python -I -S``: quick to start, whatever the job's environment).
"""

from __future__ import annotations

import array
import fcntl
import os
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

#: seconds between two looks at whether the launcher still runs (the keeper's parent): what
#: ``mpiexec`` writes meanwhile waits in the pipe, 64 KiB of it before ``mpiexec`` waits too
LOOK_EVERY = 0.2
#: what the keeper writes into the log before the first line it copies (the launcher's pid)
TAKEN_OVER = "distconv-launch: the launcher (pid {pid}) has ended; this log goes on without it\n"
#: the events by which a pipe's read end says that no process writes into it any more
_ENDED = select.POLLHUP | select.POLLERR | select.POLLNVAL


def start_keeper(pipe: int, log: Path) -> subprocess.Popen[bytes] | None:
    """Start the keeper of the output pipe whose read end is ``pipe`` (the launcher's, passed
    on under the same number) and whose lines go into ``log``; None where it cannot start
    (the child then runs as without it: its output ends with the launcher)."""
    if not sys.executable:
        return None
    argv = [sys.executable, "-I", "-S", __file__, str(pipe), str(os.getpid()), str(log)]
    try:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(pipe,), start_new_session=True,
        )  # fmt: skip
    except OSError:  # no process left to start (a pids limit): the job runs all the same
        return None


def reap_keeper(keeper: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """Wait up to ``timeout`` s for ``keeper`` to end, as it does at the pipe's end; one that
    runs on (a process outside the child's group holds the pipe) is left to end with it."""
    if keeper is not None:
        try:
            keeper.wait(timeout)
        except subprocess.TimeoutExpired:
            pass


def keep(pipe: int, launcher: int, log: str) -> None:
    """The keeper's work: wait, reading nothing, while ``launcher`` is its parent and someone
    writes into ``pipe`` or what was written is still unread; once the launcher has gone, copy
    the rest into ``log``.

    The pipe's end alone does not end it: the launcher may die after it, or have died already
    while this waited for its next look, before its pump read the last lines (``mpiexec``'s
    report of how its ranks ended, written as it exits); those lines are then copied too.
    """
    probe = select.poll()
    probe.register(pipe, 0)  # the pipe's end alone (reported whatever is asked): no data
    while os.getppid() == launcher:
        if any(events & _ENDED for _, events in probe.poll(LOOK_EVERY * 1000)):
            if not unread(pipe):
                return  # every writer gone, and the launcher's pump has read it all
            time.sleep(LOOK_EVERY)  # the end is reported at once from now on: look less often
    copy_rest(pipe, launcher, log)


def unread(pipe: int) -> int:
    """How many bytes ``pipe`` holds that nobody has read yet (``FIONREAD``); 0 where that
    cannot be asked (the keeper then ends at the pipe's end, as the launcher's pump reads)."""
    count = array.array("i", [0])
    try:
        fcntl.ioctl(pipe, termios.FIONREAD, count)
    except OSError:
        return 0
    return count[0]


def copy_rest(pipe: int, launcher: int, log: str) -> None:
    """Copy what is left in ``pipe``, and all that comes after, into ``log`` (appending, after
    :data:`TAKEN_OVER`), to the pipe's end. A log that cannot be written takes nothing more,
    but the pipe is still read to its end: a writer must never meet a pipe without a reader."""
    os.set_blocking(pipe, True)
    out = None
    while chunk := os.read(pipe, 1 << 16):
        if out is None:
            out = _opened(log)
            _write(out, TAKEN_OVER.format(pid=launcher).encode())
        _write(out, chunk)
    if out is not None and out >= 0:
        os.close(out)


def _opened(log: str) -> int:
    """``log`` opened to append (not created: it is the launcher's own), or -1."""
    try:
        return os.open(log, os.O_WRONLY | os.O_APPEND)
    except OSError:
        return -1


def _write(out: int, data: bytes) -> None:
    """Append ``data`` to ``out`` whole where it can (a full disk loses what did not fit)."""
    while out >= 0 and data:
        try:
            data = data[os.write(out, data) :]
        except OSError:
            return


if __name__ == "__main__":
    keep(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
