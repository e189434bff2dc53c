"""The record of the failures a launch's restarts recovered from: ``<run-dir>/restarts.jsonl``.

``failure.json`` is written only for the failure that ends a job; a job that a restart saved
exited 0 with no record of what failed but the launcher's stdout and the appended logs. Each
failure that a restart follows is therefore one JSON line of that file, written before the
restart starts: ``failure.json``'s fields (:func:`launcher.failure.report_entry`), its
``restart`` the attempt it ended (0 for the first) and its ``then`` ``restarting the job (1 of
N)``. A launch removes the file of a launch before it (:func:`launcher.run_dir.clear_run_dir`),
so it describes this launch. The record is not worth the job: a line that cannot be written (a
full disk, a folder in its place) is a warning, and the restart goes on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from distconv.files import describe_os_error

from .failure import Failure, report_entry
from .shown import shown

#: the file in the run directory that holds a line per failure a restart followed
RESTARTS_NAME = "restarts.jsonl"


class RestartRecord:
    """The launch's ``restarts.jsonl`` in ``run_dir``; ``say(message, level, paths=)``: the
    launcher's messages (:meth:`launcher.supervisor.Supervisor.say`), which its warnings and
    its last line go to, the file as their JSON line's ``restarts``."""

    def __init__(self, run_dir: Path, say: Callable[..., None]) -> None:
        self.path = run_dir / RESTARTS_NAME
        self.say = say
        self.restarts = 0  # the failures a restart followed
        self.written = 0  # of them, those whose line is in the file

    def add(self, failure: Failure, max_restarts: int, then: str) -> None:
        """``failure``, which the restart ``then`` (``restarting the job (1 of N)``) follows,
        appended as one line; where it cannot be written, a warning naming the file and the
        cause (the record is not worth the job: it restarts all the same)."""
        self.restarts += 1
        line = json.dumps(report_entry(failure, max_restarts, then)) + "\n"
        try:
            append_whole(self.path, line.encode())
        except OSError as exc:
            cause = describe_os_error(exc)
            self.say(
                f"cannot write {shown(self.path)}: {cause}; the job restarts all the same, this "
                "failure recorded only in the line above",
                level="warning",
                paths={"restarts": self.path},
            )
            return
        self.written += 1

    def finish(self, job_id: str | None) -> None:
        """The line a job that succeeded after restarts ends with, ``job J finished after 1
        restart(s); what each one recovered from: 'D/restarts.jsonl'`` (``job_id`` None: ``the
        job``); nothing where it needed none."""
        if not self.restarts:
            return
        job = f"job {job_id}" if job_id is not None else "the job"
        said = f"{job} finished after {self.restarts} restart(s); what each one recovered from: "
        lacks = self.restarts - self.written  # each one's warning followed its restart's line
        if not lacks:
            said += shown(self.path)
        elif self.written:
            said += f"{shown(self.path)}, and the lines above for the {lacks} it lacks"
        else:
            said += f"the lines above ({shown(self.path)} could not be written)"
        self.say(said, paths={"restarts": self.path})


def append_whole(path: Path, data: bytes) -> None:
    """``data`` (a line) appended to ``path`` (made where missing), whole or not at all: a write
    that fails part way (a full disk) is cut off again, so the next line does not continue a
    broken one, where the file lets itself be truncated.

    Raises:
        OSError: it cannot be opened or written (the file is as it was, but where the cut
            failed too).
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            try:
                os.ftruncate(fd, start)
            except OSError:  # a device (/dev/full), a file it may not cut: as it is
                pass
            raise
    finally:
        os.close(fd)
