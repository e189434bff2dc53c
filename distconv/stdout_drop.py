"""What a command whose product is its stdout does when a write to it fails: point stdout at
/dev/null, and say why in a few words. ``python -m distconv.deploy``'s list of files and
``distconv-launch``'s command and manifests (the launcher imports distconv, never the other way).
"""

from __future__ import annotations

import os
import sys

from distconv.files import describe_os_error

__all__ = ["drop_stdout", "write_failure"]


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


def write_failure(exc: OSError | UnicodeEncodeError) -> str:
    """Why a write to stdout failed, in a few lower-case words: the OS's (``broken pipe``), or
    the character stdout's encoding cannot hold (a folder named ``é`` under
    ``PYTHONIOENCODING=ascii``), which nothing of the text was written for."""
    if isinstance(exc, UnicodeEncodeError):
        return f"its encoding {exc.encoding} cannot hold {exc.object[exc.start : exc.end]!r}"
    return describe_os_error(exc)
