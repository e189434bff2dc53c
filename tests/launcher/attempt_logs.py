"""A child's log as the tests of its lines read it: the lines its process wrote, apart from the
line the launcher writes at each attempt's start (:mod:`launcher.attempt_marker`)."""

from __future__ import annotations

import re
from pathlib import Path

#: an attempt's marker line, its words as the docs give them (not imported from the code)
MARKER = re.compile(
    rb"--- (?:new )?launch (?:\S+ )?of job \S+: attempt [0-9]+(?: \(restart [0-9]+\))?, "
    rb"started [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z ---\n"
)


def logged(path: Path) -> bytes:
    """The bytes of the log at ``path`` without its attempts' marker lines."""
    return without_markers(path.read_bytes())


def without_markers(data: bytes) -> bytes:
    """``data``, a log's bytes (or what a reader of it got), without its marker lines."""
    return MARKER.sub(b"", bytes(data))


def markers(path: Path) -> list[str]:
    """The marker lines of the log at ``path``, in order, without their newlines."""
    return [found.decode().rstrip("\n") for found in MARKER.findall(path.read_bytes())]
