"""Errors said on one line: the command lines' last line, a checkpoint's reason, a worker's
``bye``. Exception messages may span lines (safetensors', msgpack's, a user's), and a line
that breaks reads as two, or is cut apart by a log's prefixes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

#: the most a worker's ``bye`` carries of the error it closes on (another process quotes it)
SENT_ERROR_CHARS = 300


def say(line: str) -> None:
    """Print ``line`` on stderr where it can go: after Ctrl-C on ``distconv train | tee``, the
    pipe's reader got the same Ctrl-C, and its EPIPE must not turn a stop into a crash. One
    write: stderr writes through, and ``print`` writes the newline apart, so the lines of two
    ranks under ``mpiexec`` would run into one another."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except OSError:
        pass


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line (each run of whitespace that breaks a line one space, the ends
    stripped), cut to ``limit`` characters (None: whole). Spaces within a line are kept: a
    quoted value (``got 'a  b'``) reads as the user typed it, not as ``'a b'``.

    The lines are those :meth:`str.splitlines` breaks, each stripped, the blank ones left out:
    time linear in ``text``, as a message may quote a value of any length. (A regular
    expression for a run of whitespace around a break went back over every run without one,
    so a value of 100,000 spaces took minutes.)"""
    said = " ".join(filter(None, (line.strip() for line in text.splitlines())))
    return said if limit is None or len(said) <= limit else said[: limit - 3] + "..."


def exception_line(error: BaseException) -> str:
    """An exception's message on one line, or its type's name where it has none."""
    return one_line(str(error)) or type(error).__name__


def named(error: BaseException) -> str:
    """``Type: message`` on one line, or ``Type`` alone where the message is empty or blank
    (``KeyboardInterrupt()``, a bare ``assert``): not ``Type:`` with nothing after it."""
    said = one_line(str(error))
    return f"{type(error).__name__}: {said}" if said else type(error).__name__


def described(error: BaseException, limit: int = SENT_ERROR_CHARS) -> str:
    """:func:`named` cut to ``limit`` characters, for another process."""
    return one_line(named(error), limit)


#: what turns a ``DISTCONV_*`` switch off (``DISTCONV_PROGRESS``, ``DISTCONV_DEBUG``,
#: ``DISTCONV_RANK_FROM_HOSTNAME``)
OFF_VALUES = ("0", "false", "no", "off")


def env_switch(name: str, environ: Mapping[str, str] | None = None) -> bool | None:
    """The environment variable ``name`` (of ``environ``, default ``os.environ``) read as a
    switch: None where unset or blank, False for one of :data:`OFF_VALUES` (any case), True for
    anything else."""
    value = (os.environ if environ is None else environ).get(name, "").strip()
    if not value:
        return None
    return value.lower() not in OFF_VALUES


def debugging() -> bool:
    """Whether ``DISTCONV_DEBUG`` asks for tracebacks instead of one-line errors: set, and not
    to an off value (``DISTCONV_DEBUG=0`` turned them on, as any value did; ``false`` still
    did, unlike ``DISTCONV_PROGRESS=false``)."""
    return env_switch("DISTCONV_DEBUG") is True
