"""A shell's string split into its words as the shell splits them (:func:`split_words`): its
comments dropped, a backquoted or double-quoted command substitution read as the command it
runs, a run of its operators one word each.

Shared by :mod:`distconv.deploy.shell`, :mod:`distconv.deploy.walk` and
:mod:`distconv.deploy.commands`.
"""

from __future__ import annotations

import re
import shlex

#: what shlex parts words at besides blanks: a shell's operators, and with newlines, those too
PUNCTUATION = {False: "();<>|&", True: "();<>|&\n"}
#: a shell string's pieces: a character after ``\``, a quoted string, or one character
_SHELL_PIECE = re.compile(r"""\\.|'[^']*'|"(?:\\.|[^"\\])*"|.""", re.DOTALL)
#: the characters after which a shell starts a new word (blanks and its operators)
_WORD_BREAK = frozenset(" \t\r\n;&|()<>")


def split_words(text: str, newlines: bool = False) -> list[str]:
    """``text`` split into words as a shell splits them, its ``#`` comments dropped
    (:func:`_without_comments`); with ``newlines``, a newline that ends a command is a word
    ``"\\n"`` (a separator) and one after ``\\`` is read past, as the shell reads them."""
    if newlines:
        text = text.replace("\\\n", "")
    lexer = shlex.shlex(
        _substitutions_as_written(_without_comments(text)),
        posix=True,
        punctuation_chars=PUNCTUATION[newlines],
    )
    lexer.whitespace_split, lexer.commenters = True, ""
    if newlines:
        lexer.whitespace = " \t\r"
    try:
        return [
            op for w in lexer for op in (_operators(w) if w and set(w) <= _PUNCTUATION else [w])
        ]
    except ValueError:  # an unbalanced quote: the words as spaces part them
        return text.split()


#: a shell's operators, the longest first, as a run of shlex's punctuation holds them; ``((``
#: and ``))`` stay one word each: they open and close an arithmetic expansion (``$((I + 1))``,
#: bash's ``(( ... ))``), whose words are no command (POSIX asks for ``( (`` where two
#: subshells are meant)
_OPERATOR = re.compile(
    r"\(\(|\)\)|;;&|;;|;&|&&|\|\||\|&|&>>|&>|>>|>&|>\||<<<|<<-|<<|<&|<>|[();<>|&]"
)
_PUNCTUATION = set(PUNCTUATION[True])


def _operators(word: str) -> list[str]:
    """``word``, a run of a shell's operators and newlines that shlex gives as one word
    (``);``, ``)|``, ``&&(``), as the operators it holds, one word each; a newline after an
    operator goes on with its command (``|`` of ``echo ... |`` then ``sh`` on the next line),
    and newlines alone are one separator, ``"\n"``."""
    return _OPERATOR.findall(word) or ["\n"]


def _substitutions_as_written(text: str) -> str:
    """``text`` with each unquoted backquoted command substitution (```CMD```) written as
    ``$(CMD)``, the same command the shell runs: its words are read as a command, as those of
    ``$(CMD)`` are (``(`` starts one); one in double quotes (``"$(CMD)"``, ``"`CMD`"``) taken
    out of them (:func:`_out_of_quotes`), where shlex would keep it one word."""
    pieces, opened = [], False
    for piece in _pieces(text):
        if piece == "`":
            piece, opened = (")" if opened else "$("), not opened
        pieces.append(_out_of_quotes(piece) if piece.startswith('"') else piece)
    return "".join(pieces)


def _pieces(text: str) -> list[str]:
    """``text``'s pieces: a character after ``\\``, a quoted string, or one character. A
    double-quoted string ends at the first ``"`` outside the command substitutions in it, whose
    quotes are their own (``"$(distconv train --out "/a b")"`` is one piece)."""
    pieces, at = [], 0
    while at < len(text):
        end = _quoted_end(text, at + 1) if text[at] == '"' else _SHELL_PIECE.match(text, at).end()
        pieces.append(text[at:end])
        at = end
    return pieces


def _quoted_end(text: str, at: int) -> int:
    """The index past the ``"`` that closes the double-quoted string whose text starts at
    ``at``, the ``$(...)`` in it read past (:func:`_substitution_end`); ``len(text)`` where
    it is left open."""
    while at < len(text):
        if text[at] == '"':
            return at + 1
        if text.startswith("$(", at):
            at = _substitution_end(text, at + 2)
        else:
            at += 2 if text[at] == "\\" else 1
    return len(text)


def _substitution_end(text: str, at: int) -> int:
    """The index past the ``)`` that closes the ``$(`` before ``at``: the parentheses, quoted
    strings and escaped characters in it read past; ``len(text)`` where it is left open."""
    depth = 1
    while at < len(text):
        letter = text[at]
        if letter == "'":
            close = text.find("'", at + 1)
            at = len(text) if close < 0 else close + 1
            continue
        if letter == '"':
            at = _quoted_end(text, at + 1)
            continue
        depth += {"(": 1, ")": -1}.get(letter, 0)
        if depth == 0:
            return at + 1
        at += 2 if letter == "\\" else 1
    return len(text)


def _out_of_quotes(quoted: str) -> str:
    """``quoted``, a double-quoted string, with each command substitution in it (``$(CMD)``,
    ```CMD```; not an arithmetic ``$((...))``) written ``$(CMD)`` outside the quotes
    (``"x=$(CMD) y"`` as ``"x="$(CMD)" y"``): the text around it stays quoted, and the command
    is read as one, its own quotes too (``X="$(distconv train --out "/a b")"`` runs a rank).
    One left open leaves the string as written."""
    body_end = len(quoted) - 1 if len(quoted) > 1 and quoted.endswith('"') else len(quoted)
    parts, start, at = [], 1, 1
    while at < body_end:
        if quoted.startswith("$(", at) and not quoted.startswith("$((", at):
            end = _substitution_end(quoted, at + 2)
            command = quoted[at + 2 : end - 1]
        elif quoted[at] == "`":
            end = quoted.find("`", at + 1) + 1
            command = quoted[at + 1 : end - 1]
        else:
            at += 2 if quoted[at] == "\\" else 1
            continue
        if end <= at or end > body_end:  # left open: only the running shell knows
            return quoted
        before, command = quoted[start:at], _substitutions_as_written(command)
        parts.append(f'"{before}"$({command})' if before else f"$({command})")
        start = at = end
    rest = quoted[start:body_end]
    return "".join(parts) + (f'"{rest}"' if rest else "") if parts else quoted


def _without_comments(text: str) -> str:
    """``text``, a shell's string, less its comments as the shell reads them: an unquoted ``#``
    that starts a word, to the end of its line (the newline kept). A ``#`` inside a word
    (``$#``, ``${#X}``, ``a#b``), quoted or after ``\\`` starts none (POSIX, Shell Command
    Language 2.3: "If the current character is a '#', it and all subsequent characters up to,
    but excluding, the next <newline> shall be discarded as a comment", read only where a
    token starts); shlex's own comments start at any unquoted ``#``."""
    kept: list[str] = []
    starts_word, in_comment = True, False
    for piece in _pieces(text):
        in_comment = piece != "\n" and (in_comment or (piece == "#" and starts_word))
        if not in_comment:
            kept.append(piece)
        starts_word = piece in _WORD_BREAK
    return "".join(kept)
