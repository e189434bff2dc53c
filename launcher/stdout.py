"""What the launcher writes on its stdout as its whole product: ``mpi --dry-run``'s command
and ``k8s``'s manifests. Their write is flushed at once, so a stdout that cannot take them is
the launcher's one error line, not Python's ``Exception ignored in: <_io.TextIOWrapper
name='<stdout>'>`` and exit 120 from the flush at exit."""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

from distconv.stdout_drop import drop_stdout, write_failure

from .commands import LaunchError

__all__ = ["binary_stream", "write_stdout"]


def write_stdout(text: str, what: str, closed: str) -> None:
    """Write ``text`` on stdout and flush it.

    Args:
        text: what to write, its last newline included.
        what: what ``text`` is, for the error (``the command``).
        closed: what to say where stdout is closed (``>&-``, a daemon's start), after
            ``stdout is closed:``.

    Raises:
        LaunchError: stdout is closed; or the write failed (a full disk, a reader that is
            gone, a character its encoding cannot hold), naming why: nothing of ``text`` may
            be taken for written.
    """
    if sys.stdout is None:  # where Python left it None, print() drops everything unsaid
        raise LaunchError(f"stdout is closed: {closed}")
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, UnicodeEncodeError) as exc:  # a full disk; a path its encoding lacks
        drop_stdout()
        raise LaunchError(f"cannot write {what} to stdout: {write_failure(exc)}") from None


def binary_stream(stream: object) -> BinaryIO:
    """A text stream's bytes, or /dev/null's where Python left it None: a launcher started
    with the descriptor closed (``>&-``, a daemon's start) stopped on ``None.buffer`` before
    any child started; the children's logs in the run directory keep what it drops."""
    if stream is None:
        return open(os.devnull, "wb")  # open for the launcher's whole life
    return stream.buffer  # type: ignore[attr-defined]
