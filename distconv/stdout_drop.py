"""Pointing stdout at /dev/null after a write to it failed, for the commands whose product is
their stdout: ``python -m distconv.deploy``'s list of files, ``distconv-launch``'s command and
manifests (the launcher imports distconv, never the other way)."""

from __future__ import annotations

import os
import sys

__all__ = ["drop_stdout"]


def drop_stdout() -> None:
    """Point stdout's descriptor at /dev/null: what is left in its buffer would fail again at
    the flush at exit (Python's "Note on SIGPIPE")."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # None, or no file: no flush at exit
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
