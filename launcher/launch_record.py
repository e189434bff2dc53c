"""What a launch records of itself in its run directory: ``<run-dir>/launch.json``.

The line that starts a job names its distconv build, but only on the terminal; the command that
started it was nowhere. ``launch.json`` holds a JSON list with an object per launch into the run
directory, oldest first: the launcher's command line (``argv``, as the process got it; ``command``,
as the shell ran it, the interpreter and ``-m launcher`` included, which re-runs it; with the
folder it ran in, ``cwd``, against which its relative paths are read), the Python that ran it
and so runs its workers (``python``: a virtual environment's), the variables of its environment
that change what a job computes or how (``env``: :data:`ENV_PREFIXES`; a value whose name
says it is a secret withheld, :data:`SECRET_NAME`), the job id, distconv's build
(:func:`~distconv.build_identity.build_id`), numpy's installed version, the host and the time
it started (UTC). A launch into a run directory that has one already (``--resume``, a
relaunch of the job id) appends its own: the earlier launches are kept, as a resume keeps the
run's checkpoints. The file is replaced atomically (:func:`~distconv.files.write_atomically`),
so a crash leaves the old list or the new one.

The record is not worth the job: where it cannot be written (a full disk), or the file there is
no list of launches (damaged, or not this launcher's), a warning says so and the job goes on; a
file that cannot be read as a list, or is no file (a named pipe, which a read would wait on for
ever), is moved aside to ``launch.json.unreadable`` (``.unreadable.2`` where that is taken),
never written over.
"""

from __future__ import annotations

import errno
import importlib.metadata
import json
import os
import re
import socket
import stat
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distconv.build_identity import build_id
from distconv.checkpoint_file_kinds import special_kind
from distconv.files import describe_os_error, write_atomically

from .shown import shown

if TYPE_CHECKING:
    from .supervisor import Supervisor

#: the file in the run directory that lists the launches into it
LAUNCH_NAME = "launch.json"
#: what a launch record's file that is no list of launches is renamed to (then ``.2``, ...)
UNREADABLE_SUFFIX = ".unreadable"
#: the environment variables a launch records (``env``): distconv's own (threads, device,
#: autotuning, cuDNN, ...) and the BLAS and OpenMP thread settings the workers inherit, which a
#: re-run needs as much as the command line. None of distconv's holds a secret
#: (``DISTCONV_KEYS`` names a folder), but a program of one's own may read its own token from
#: a ``DISTCONV_`` variable: see :data:`SECRET_NAME`
ENV_PREFIXES = ("DISTCONV_", "OPENBLAS_", "OMP_", "MKL_", "BLIS_")
#: a name that says its variable holds a secret (``DISTCONV_HF_TOKEN``, ``..._API_KEY``): its
#: value is not written to ``launch.json``, which other users of a shared file system may read
#: (0644 less the umask), only :data:`WITHHELD`, so a re-run still learns that it was set
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|PRIVATE|AUTH|APIKEY|(^|_)KEY($|_)"
)
#: what ``env`` holds in place of a secret's value
WITHHELD = "(withheld: its name says it holds a secret)"


def this_launch(job_id: str | None) -> dict[str, Any]:
    """This launcher process's record: ``argv``, ``command``, ``cwd``, ``python``
    (``sys.executable``), ``env`` (the variables :data:`ENV_PREFIXES` names, sorted, a
    secret's value withheld: :func:`_recorded_env`), ``job``, ``build``, ``numpy``
    (the installed distribution's version, read without importing numpy, which a launch of a
    program of the user's never needs; None where none is installed), ``host`` and
    ``started`` (``2026-12-07T14:52:53Z``)."""
    try:
        numpy = importlib.metadata.version("numpy")
    except importlib.metadata.PackageNotFoundError:
        numpy = None
    return {
        "argv": list(sys.argv),
        # the command as the shell ran it, interpreter and ``-m launcher`` included: argv[0]
        # of ``python -m launcher`` is launcher/__main__.py, which does not run on its own
        "command": list(sys.orig_argv),
        "cwd": os.getcwd(),
        "python": sys.executable,
        "env": _recorded_env(os.environ),
        "job": job_id,
        "build": build_id(),
        "numpy": numpy,
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _recorded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` that :data:`ENV_PREFIXES` names, sorted, each whose name
    says it is a secret (:data:`SECRET_NAME`) with :data:`WITHHELD` in place of its value."""
    return {
        name: WITHHELD if SECRET_NAME.search(name.upper()) else value
        for name, value in sorted(environ.items())
        if name.startswith(ENV_PREFIXES)
    }


def record_launch(launch: Supervisor) -> None:
    """Append this launch's record (:func:`this_launch`) to ``launch.json`` in
    ``launch.run_dir``, which the launch holds (made and locked: call it after
    :meth:`~launcher.supervisor.Supervisor.claim`). A file there that is no list of launches
    is moved aside first; a record that cannot be written is a warning, and the launch goes
    on."""
    path = launch.run_dir / LAUNCH_NAME
    try:
        earlier = _earlier_launches(path, launch)
        records = [*earlier, this_launch(launch.job_id)]
        write_atomically(path, [(json.dumps(records, indent=1) + "\n").encode()])
    except OSError as exc:
        launch.say(
            f"cannot record this launch in {shown(path)}: {describe_os_error(exc)}; the job "
            "goes on, its launch not recorded there",
            level="warning",
        )


def _earlier_launches(path: Path, launch: Supervisor) -> list[Any]:
    """The launches ``path`` lists (none where it is missing); a file that lists none (not
    JSON, not a list of objects) or is no file (a named pipe, a device) is renamed aside, said
    in a warning, and counts as none."""
    try:
        records, problem = _launches_in(path)
    except FileNotFoundError:
        return []
    if problem is None:
        return records
    aside = _free_name(path.with_name(path.name + UNREADABLE_SUFFIX))
    os.rename(path, aside)
    launch.say(
        f"{shown(path)} is {problem}: moved to {shown(aside)}, and a new list started",
        level="warning",
    )
    return []


def _launches_in(path: Path) -> tuple[list[Any], str | None]:
    """The launches ``path`` lists and None, or none and what it is instead.

    Raises:
        OSError: it cannot be read (FileNotFoundError: nothing is there; IsADirectoryError).
    """
    text, kind = _read_file(path)
    if kind is not None:
        return [], f"{kind}, not a file"
    try:
        records = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError; '[[[...'
        return [], f"not JSON ({exc})"
    if isinstance(records, list) and all(isinstance(r, dict) for r in records):
        return records, None
    return [], "not a list of launches"


def _read_file(path: Path) -> tuple[bytes, str | None]:
    """``path``'s bytes and None, or none and what it is where it is no file nor folder (a
    named pipe, a socket, a device: :func:`~distconv.checkpoint_file_kinds.special_kind`).
    Opened without blocking: a named pipe's open waited for a writer for ever, the run
    directory locked and the job not started, with nothing said.

    Raises:
        OSError: as :meth:`Path.read_bytes` (IsADirectoryError for a folder).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            return b"", special_kind(mode)
        with open(fd, "rb", closefd=False) as f:
            return f.read(), None
    finally:
        os.close(fd)


def _free_name(path: Path) -> Path:
    """``path``, or where it is taken, the first of ``path.2``, ``path.3``, ... that is free."""
    number, free = 1, path
    while os.path.lexists(free):
        number += 1
        free = path.with_name(f"{path.name}.{number}")
    return free
