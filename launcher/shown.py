"""How the launcher's lines show a value: a path (a run directory's log, its failure report),
a command, a name the user gave or a child wrote.

A module of its own, below every other: the queue that writes the launcher's messages
(:mod:`launcher.terminal`) names the run directory's files too, and :mod:`launcher.messages`
imports that queue.
"""

from __future__ import annotations

import os

from distconv.messages import shell_quoted


def shown(value: str | os.PathLike[str]) -> str:
    """``value`` (a path, a command, a name the user gave or a child wrote) as the launcher's
    messages quote it: ``'value'``, or where it holds a quote or a character that does not
    print, the shell's ``$'...'`` word (:func:`distconv.messages.shell_quoted`), as the rest
    of the launcher's lines show such values. ``repr()`` wrote ``'no\\nfile.py'``, which a
    shell pastes back as another name, and ``"it's"`` in double quotes; a run directory's path
    with a line break in it, unquoted, split a one-line message in two."""
    value = os.fspath(value)
    if value.isprintable() and "'" not in value:
        return f"'{value}'"
    return shell_quoted(value)


#: the characters :meth:`str.splitlines` breaks a line at, each as its escape (``\\n``)
_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


def unbroken(text: str) -> str:
    """``text`` on one line: each character that breaks a line (those of
    :meth:`str.splitlines`) as its escape, ``\\n`` for a line break. The last guard of the
    launcher's one-line messages (:meth:`launcher.messages.Messages.line`): a value put in one
    unquoted (a program's path, an error naming it) split it, its second part read as a line
    of another message, without the ``distconv-launch:`` prefix."""
    return text.translate(_BREAKS)
