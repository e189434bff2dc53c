"""Jobs run by tests that leave nothing behind, even when the test fails or the job hangs.

A launcher starts each child in a session of its own, a child starts grandchildren, and a child
may ignore SIGTERM: killing the one process a test started (``subprocess.run``'s timeout)
leaves the rest running for minutes. Neither the process tree (an orphan is reparented to
init) nor one process group (each child has its own) finds them all, so every process of a
job carries a mark in its environment, which children inherit through ``exec``, ``setsid``
and orphaning alike, and the job is whatever carries the mark. Only a program that clears its
environment (``env -i``) escapes it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from distconv.notes import add_note

#: the environment variable that marks every process of one test's job: outside every prefix
#: the product reads, exports or removes (``DISTCONV_`` variables are its own, passed to each
#: rank with ``-x`` by Open MPI), so the mark changes nothing a test checks
MARK = "TESTS_PROCESSES_JOB"


def marked(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with a new job's mark: processes started with it (and theirs) are the job."""
    return {**env, MARK: secrets.token_hex(8)}


def _entry(env: Mapping[str, str]) -> bytes:
    """The mark of the job marked in ``env``, as ``/proc/PID/environ`` holds it."""
    return f"{MARK}={env[MARK]}".encode()


def _carries(pid: int, entry: bytes) -> bool:
    """Whether the process ``pid`` has ``entry`` in its environment (a zombie's reads empty:
    it is dead, only not yet reaped; one gone, or not ours to read, carries nothing)."""
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False


def job_processes(env: Mapping[str, str]) -> dict[int, str]:
    """Each live process of the job marked in ``env``, by pid, with its command line."""
    entry = _entry(env)
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        if not _carries(int(proc.name), entry):
            continue
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").strip()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # gone meanwhile
        found[int(proc.name)] = args.decode(errors="replace")
    return found


def _kill_marked(pid: int, entry: bytes) -> bool:
    """SIGKILL the process ``pid`` if it carries ``entry``, through a pidfd opened before the
    look: the process a scan found may have exited and its pid gone to another (another test's
    job, the test runner's own child) by now, and a plain ``kill(pid)`` would hit that one.
    Returns whether the signal went."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False  # gone
    except OSError as exc:  # refused: Linux before 5.3, older Docker releases' seccomp profile
        if exc.errno not in (errno.ENOSYS, errno.EPERM):
            raise
        return _kill_marked_by_pid(pid, entry)
    try:  # the look comes after the open: a pid reused between the two is not ours to kill
        if not _carries(pid, entry):
            return False
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        os.close(pidfd)


def _kill_marked_by_pid(pid: int, entry: bytes) -> bool:
    """:func:`_kill_marked` where pidfds are refused: the look, then a plain ``kill(pid)``. A
    pid reused between the two (microseconds, not the scan's milliseconds) is still hit: on
    such a host that is the price of not leaving the job running."""
    if not _carries(pid, entry):
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_job(env: Mapping[str, str]) -> str:
    """SIGKILL every process of the job marked in ``env``, scanning again while one is found
    (one may fork between the scan and the kill, or take the pid of one gone before it);
    returns ``pid args`` lines of those signalled."""
    entry = _entry(env)
    killed: dict[int, str] = {}
    for _ in range(20):
        # every scan kills all it finds, those signalled before included (a SIGKILL again
        # is harmless): a pid seen before may be a new process of the job by now
        if not (found := job_processes(env)):
            break
        killed |= {pid: args for pid, args in found.items() if _kill_marked(pid, entry)}
    return "\n".join(f"{pid} {args}" for pid, args in sorted(killed.items())) or "(none)"


def job_left(env: Mapping[str, str], seconds: float) -> dict[int, str]:
    """What of the job marked in ``env`` is still alive after waiting up to ``seconds`` for
    it to go (as :func:`job_processes`): empty once the job is over. The event a check of an
    absence waits for (a child that never ran), where a fixed pause misses one started late."""
    deadline = time.monotonic() + seconds
    while (left := job_processes(env)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


class CompletedJob(subprocess.CompletedProcess):
    """A :class:`subprocess.CompletedProcess` with ``env``, the environment that marks its
    job: what of the job outlived the process is :func:`job_processes` of it."""

    def __init__(
        self, args: Any, returncode: int, stdout: Any, stderr: Any, env: Mapping[str, str]
    ) -> None:
        super().__init__(args, returncode, stdout, stderr)
        self.env = dict(env)


@contextlib.contextmanager
def job_env(env: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """``env`` marked for a job started inside the ``with``; whatever of the job is still
    alive at its end, the test passed or not, is killed. Check what must be gone first."""
    job = marked(env)
    try:
        yield job
    finally:
        kill_job(job)


def run_job(
    argv: Sequence[str],
    env: Mapping[str, str],
    timeout: float,
    *,
    stdout: int | IO[Any] | None = subprocess.PIPE,
    stderr: int | IO[Any] | None = subprocess.PIPE,
    **kwargs: Any,
) -> CompletedJob:
    """:func:`subprocess.run` of ``argv`` (output captured as text unless ``stdout`` or
    ``stderr`` say otherwise, as :class:`subprocess.Popen`'s do): where it runs past
    ``timeout``, every process of the job is killed, not only the first, and the
    :class:`subprocess.TimeoutExpired` (raised still) names them (Python 3.11+). What of the
    job outlives a normal end is left for the test to check: the result's ``env`` finds it."""
    job = marked(env)
    proc = subprocess.Popen(argv, env=job, stdout=stdout, stderr=stderr, text=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as exc:  # a timeout, or pytest's own timeout or a Ctrl-C
        try:
            note = f"processes of the job killed:\n{kill_job(job)}"
        except OSError as error:  # what went wrong first is what the test reports
            note = f"the job could not be killed by its mark: {error}"
        finally:  # the first process goes even so (were its mark lost, or the kill failed);
            proc.kill()  # and no communicate(): what escaped may hold a pipe
            proc.wait()
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        add_note(exc, note)
        raise
    return CompletedJob(proc.args, proc.returncode, out, err, job)
