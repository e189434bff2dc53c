"""How ``env`` reads the options before its command: whether they remove a variable
(:func:`env_removes`), and the words its ``-S`` strings split into (:func:`split_env_strings`),
as GNU coreutils' env reads them.

Used by :mod:`distconv.deploy.shell` and :mod:`distconv.deploy.walk`, which read the programs
before ``distconv`` on a container's command line.
"""

from __future__ import annotations

import re
import shlex

#: env's options that empty the environment, its long ones whose value is the next word, and
#: its short ones that take a value (the rest of the word, or the next word)
_ENV_CLEARS = {"-", "-i", "--ignore-environment"}
_ENV_VALUED = {"--unset", "--chdir", "--split-string", "--argv0"}
#: ``-a``/``--argv0 NAME``: GNU env's since coreutils 9.5
_ENV_SHORT_VALUED = "uCSa"
#: what env expands, escapes or ends in a string it splits (``${NAME}``, ``\\t``, ``#``)
_ENV_SPLIT_SYNTAX = re.compile(r"[\\$#]")


def env_removes(args: list[str], name: str) -> bool:
    """Whether the options ``env`` reads at the head of ``args`` remove variable ``name``."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        word, after = args[i], args[i + 1 : i + 2]
        if word in _ENV_CLEARS or word == f"--unset={name}" or (word, after) == ("--unset", [name]):
            return True
        if word.startswith("--"):
            i += 2 if word in _ENV_VALUED else 1
            continue
        # short options written together (-iv, -vu NAME, -uNAME), read a letter at a time as
        # getopt reads them: the rest of the word, or the next word, is the value of -u, -C,
        # -S or -a
        for at, letter in enumerate(word[1:], 2):
            if letter == "i":
                return True
            if letter in _ENV_SHORT_VALUED:
                value = word[at:] or "".join(after)
                if letter == "u" and value == name:
                    return True
                i += 0 if word[at:] else 1
                break
        i += 1
    return False


def split_env_strings(argv: list[str]) -> list[str]:
    """``argv`` with the string of each ``env -S STRING`` before ``distconv`` (``-SSTRING``,
    ``-vS STRING``, ``--split-string=STRING``) replaced by the words env splits it into, which
    it reads as if written there (``env -S "-u NAME distconv train"`` is ``env -u NAME distconv
    train``). A string holding what env expands, escapes or ends (``${NAME}``, ``\\``, ``#``)
    stays as written: only the running env knows its words."""
    words, i = list(argv), 0
    while i < len(words):
        program = words[i].rsplit("/", 1)[-1]
        if program == "distconv":
            break
        i = _env_options(words, i + 1) if program == "env" else i + 1
    return words


def _env_options(words: list[str], i: int) -> int:
    """Read env's options from ``words[i]`` on, splicing each ``-S`` string's words in place;
    the index past them."""
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return i + 1
        option, value, span, before = _env_option(words, i)
        split = None if option != "S" or value is None else _env_split(value)
        if split is None:
            i += span
            continue
        words[i : i + span] = [*before, *split]
        i += len(before)
    return i


def _env_option(words: list[str], i: int) -> tuple[str, str | None, int, list[str]]:
    """(the option env reads at ``words[i]``, ``"S"`` for ``--split-string``; its value or
    None; the words it spans; the options written before it in the same word, as ``-v`` of
    ``-vS``)."""
    word, after = words[i], words[i + 1] if i + 1 < len(words) else None
    if word.startswith("--"):
        name, eq, value = word.partition("=")
        option = "S" if name == "--split-string" else name
        if eq:
            return option, value, 1, []
        return (option, after, 2, []) if name in _ENV_VALUED else (option, None, 1, [])
    for at, letter in enumerate(word[1:], 2):
        if letter in _ENV_SHORT_VALUED:
            rest, before = word[at:], [word[: at - 1]] if at > 2 else []
            return (letter, rest, 1, before) if rest else (letter, after, 2, before)
    return word, None, 1, []


def _env_split(text: str) -> list[str] | None:
    """The words env's ``-S`` splits ``text`` into (blanks apart, quotes removed), or None
    where it holds what env expands or escapes."""
    if _ENV_SPLIT_SYNTAX.search(text):
        return None
    try:
        return shlex.split(text)
    except ValueError:  # an unbalanced quote: env refuses it
        return None
