"""Errors said on one line: the command lines' last line, a checkpoint's reason, a worker's
``bye``. Exception messages may span lines (safetensors', msgpack's, a user's), and a line
that breaks reads as two, or is cut apart by a log's prefixes.
"""

from __future__ import annotations

import os

#: the most a worker's ``bye`` carries of the error it closes on (another process quotes it)
SENT_ERROR_CHARS = 300


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line (each run of whitespace one space), cut to ``limit`` characters
    (None: whole)."""
    said = " ".join(text.split())
    return said if limit is None or len(said) <= limit else said[: limit - 3] + "..."


def exception_line(error: BaseException) -> str:
    """An exception's message on one line, or its type's name where it has none."""
    return one_line(str(error)) or type(error).__name__


def described(error: BaseException, limit: int = SENT_ERROR_CHARS) -> str:
    """``Type: message`` on one line, cut to ``limit`` characters, for another process."""
    return one_line(f"{type(error).__name__}: {error}", limit)


def debugging() -> bool:
    """Whether ``DISTCONV_DEBUG`` asks for tracebacks instead of one-line errors: set to
    anything but empty or ``0`` (``DISTCONV_DEBUG=0`` turned them on, as any value did)."""
    return os.environ.get("DISTCONV_DEBUG", "").strip() not in ("", "0")
