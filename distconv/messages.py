"""Errors said on one line: the command lines' last line, a checkpoint's reason, a worker's
``bye``. Exception messages may span lines (safetensors', msgpack's, a user's), and a line
that breaks reads as two, or is cut apart by a log's prefixes. The notes an error carries
(PEP 678), often the way out, go on lines of their own before it (:func:`note_lines`).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping

from distconv.notes import notes_of

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


#: values given with a line break or another character that does not print in them (a path,
#: ``--out $'a\nb'``), each with its :func:`shell_quoted` form: set by
#: :func:`quote_in_errors`, read by :func:`one_line`
_QUOTED: dict[str, str] = {}
#: what a shell's ``$'...'`` writes by name
_ESCAPES = {
    "\\": "\\\\",
    "'": "\\'",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\f": "\\f",
}


def shell_quoted(text: str) -> str:
    """``text`` as a shell's ``$'...'`` word: a line break, a quote or any other character
    that does not print escaped (``$'a\\nb'``), so it reads unambiguously on one line and
    pastes back into a shell as the same value."""
    escaped = []
    for ch in text:
        if ch in _ESCAPES:
            escaped.append(_ESCAPES[ch])
        elif ch.isprintable():
            escaped.append(ch)
        else:
            escaped.append(_escaped_bytes(ch))
    return "$'" + "".join(escaped) + "'"


def shell_word(text: str) -> str:
    """``text`` as one shell word on one line that pastes back as itself: as it is where it
    can, in quotes where it holds a space or the like (:func:`shlex.quote`), the ``$'...'``
    word (:func:`shell_quoted`) where a character does not print."""
    return shlex.quote(text) if text.isprintable() else shell_quoted(text)


def _escaped_bytes(ch: str) -> str:
    """A character that does not print as the bytes the file system names it by, each
    ``\\xHH`` (two digits: a hex digit after it is not read as part of the escape): ``\\x85``
    made the byte 0x85, not U+0085 (``\\xc2\\x85``), and a byte that is no UTF-8 (``\\xff``,
    held as the surrogate ``\\udcff``) came back as ``\\udcff``, three other bytes. A character
    the file system's encoding lacks is written as its code point (``\\u2028``)."""
    try:
        raw = os.fsencode(ch)
    except UnicodeEncodeError:
        code = ord(ch)
        return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    return "".join(f"\\x{byte:02x}" for byte in raw)


def quote_in_errors(values: Iterable[str | os.PathLike[str]]) -> None:
    """Have :func:`one_line` show each of ``values`` that breaks a line or holds another
    character that does not print (a path the user gave) :func:`shell_quoted`, as written
    or made absolute, and each folder above it that does too, where an error quotes it:
    squeezed like the message's own breaks, ``x\\ny`` read as ``x y``, another path.
    Replaces the values of an earlier call; ordinary values are shown as they are."""
    _QUOTED.clear()
    _QUOTED.update(_quoted_forms(values))


def quoted_in(text: str, values: Iterable[str | os.PathLike[str]]) -> str:
    """``text`` with ``values`` quoted as :func:`quote_in_errors` has :func:`one_line` quote
    them, for a message no ``one_line`` reads: an argparse type's, which argparse prints as
    it is, before the command line has handed its values to :func:`quote_in_errors`."""
    return _replaced(text, _quoted_forms(values))


def _quoted_forms(values: Iterable[str | os.PathLike[str]]) -> dict[str, str]:
    """Each form of each of ``values`` that holds a character that does not print (a line
    break; a tab; a byte of no UTF-8, which stderr wrote ``\\udcff``, and JSON a lone
    surrogate: another path either way), with its :func:`shell_quoted` one."""
    quoted = {}
    for value in values:
        text = os.fspath(value)
        if not text.strip():  # a bare break: the message's own breaks would be quoted
            continue
        for form in _forms(text):
            while not form.isprintable():
                quoted[form] = shell_quoted(form)
                form = os.path.dirname(form.rstrip(os.sep)) if os.sep in form else ""
    return quoted


def _forms(text: str) -> set[str]:
    """The forms an error may name ``text`` by: as written, as ``Path(text)`` writes it (no
    './' nor trailing '/': normpath), absolute, and with its links resolved, where it can be:
    realpath raised on a link that refuses readlink (``--out /proc/1/cwd/run``), abspath
    where the working directory is gone, and ``distconv train`` ended in a traceback."""
    forms = {text, os.path.normpath(text)}
    for absolute in (os.path.abspath, os.path.realpath):
        try:
            forms.add(absolute(text))
        except OSError:
            pass
    return forms


def _quoted(text: str) -> str:
    """``text`` with each value of :func:`quote_in_errors` in it quoted."""
    return _replaced(text, _QUOTED)


def _replaced(text: str, quoted: Mapping[str, str]) -> str:
    """``text`` with each key of ``quoted`` in it replaced by its value, the longest first (an
    absolute form holds the form as written), where it stands as a word of its own: not glued
    to a letter or digit on either side. A value that begins or ends with its line break
    (``--out $'run\\n'``) matched the message's own break after a word (``the run\\nfrom``),
    which was shown ``the $'run\\n'from``."""
    if not quoted:
        return text
    keys = "|".join(map(re.escape, sorted(quoted, key=len, reverse=True)))
    return re.sub(rf"(?<!\w)(?:{keys})(?!\w)", lambda found: quoted[found.group()], text)


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line (each run of whitespace that breaks a line one space, the ends
    stripped), cut to ``limit`` characters (None: whole). Spaces within a line are kept: a
    quoted value (``got 'a  b'``) reads as the user typed it, not as ``'a b'``. A value given
    to :func:`quote_in_errors` is :func:`shell_quoted` in it instead (its breaks escaped).

    The lines are those :meth:`str.splitlines` breaks, each stripped, the blank ones left out:
    time linear in ``text``, as a message may quote a value of any length. (A regular
    expression for a run of whitespace around a break went back over every run without one,
    so a value of 100,000 spaces took minutes.)"""
    said = " ".join(filter(None, (line.strip() for line in _quoted(text).splitlines())))
    return said if limit is None or len(said) <= limit else said[: limit - 3] + "..."


def exception_line(error: BaseException) -> str:
    """An exception's message on one line, or its type's name where it has none."""
    return one_line(str(error)) or type(error).__name__


def note_lines(who: str, error: BaseException) -> list[str]:
    """``WHO: note: LINE`` for each line of ``error``'s notes (PEP 678: ``add_note``), to go
    before the one-line error that ends a process (``WHO: error: ...``), which stays its last
    line: the launcher reads it. Each line stripped, the blank ones left out, and a value of
    :func:`quote_in_errors` shown :func:`shell_quoted`, as :func:`one_line` shows it; none
    where ``error`` has no notes. A note on a line of its own, not squeezed into the error's:
    the error's line is what the launcher and a user's ``grep`` match, and a note may be long."""
    lines = (line.strip() for note in notes_of(error) for line in _quoted(note).splitlines())
    return [f"{who}: note: {line}" for line in lines if line]


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
