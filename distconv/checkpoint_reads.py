"""Looking at a run's checkpoint files without taking an I/O error for damage or absence.

A manifest or part the OS cannot read now (EIO, EACCES, a network file system's hiccup) may be
whole: passed over as damaged or missing, the resume would go on from an older step, and an
asynchronous run lose its newer state for good. These raise
:class:`~distconv.checkpoint.CheckpointReadError` instead, which renames nothing.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from distconv.checkpoint import CheckpointReadError
from distconv.files import describe_os_error


def read_manifest(path: Path) -> bytes:
    """The manifest's bytes; raises FileNotFoundError and IsADirectoryError as they are."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        raise
    except OSError as exc:  # EIO, EACCES, a network file system's hiccup: may pass
        raise CheckpointReadError(
            f"checkpoint manifest {path} cannot be read: {describe_os_error(exc)}; nothing is "
            "skipped or renamed, retry once it can be read"
        ) from None


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
