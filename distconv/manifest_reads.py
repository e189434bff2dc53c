"""Looking at a run's checkpoint manifests and parts without taking an I/O error for damage or
absence, and without numpy: the launcher reads which checkpoint a failed run keeps
(:mod:`distconv.checkpoint_scan`) and must stay small beside the lines it carries.

A manifest or part the OS cannot read now (EIO, EACCES, a network file system's hiccup) may be
whole: passed over as damaged or missing, the resume would go on from an older step, and an
asynchronous run lose its newer state for good. These raise
:class:`~distconv.checkpoint_errors.CheckpointReadError` instead, which renames nothing.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from distconv.checkpoint_errors import CheckpointError, CheckpointReadError
from distconv.checkpoint_file_kinds import special_kind
from distconv.files import describe_os_error


class ManifestNotAFile(CheckpointError):
    """A manifest's name is held by a named pipe, a socket or a device: no save wrote it, and
    no retry makes it a manifest (unlike a :class:`CheckpointReadError`). The message names
    what it is and says to move it away."""


def read_manifest(path: Path) -> bytes:
    """The manifest's bytes; raises FileNotFoundError and IsADirectoryError as they are.

    Raises:
        ManifestNotAFile: a named pipe, a socket or a device, refused at once: opened, a pipe
            without a writer held a resume, or a save's pruning, for ever. Looked at before
            the open: a save renames a regular file into a manifest's name, never a pipe.
        CheckpointReadError: the OS could not read it (EIO, EACCES).
    """
    try:
        kind = special_kind(path.stat().st_mode)
        if kind is None:
            return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        raise
    except OSError as exc:  # EIO, EACCES, a network file system's hiccup: may pass
        raise CheckpointReadError(
            f"checkpoint manifest {path} cannot be read: {describe_os_error(exc)}; nothing is "
            "skipped or renamed, retry once it can be read"
        ) from None
    raise ManifestNotAFile(
        f"{path} is {kind}, not a manifest (a save writes a regular file): move it out of "
        f"{path.parent}"
    )


def is_part_file(path: Path) -> bool:
    """Whether a checkpoint part is a file; False only for one that is not there (or not a file).

    ``os.stat`` itself: ``Path.is_file`` raises for an I/O error on some Python versions and
    answers False on others, which would pass an unreadable part over as missing.
    """
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:  # EACCES, EIO: the part may be whole
        raise CheckpointReadError(
            f"checkpoint part {path} cannot be looked at: {describe_os_error(exc)}; retry once "
            "it can"
        ) from None
