"""Where a researcher who asks ``distconv train`` for asynchronous SGD is pointed: it is the
shards' setting (``distconv pserver --mode async``, or the launcher's ``--mode async`` before
``--``), not a flag of the workers'.

:func:`asks_async` is the one test of "a word that means async", which ``distconv train``'s
refusals (:func:`refuse_own_unknowns`) and the launcher's (:func:`launcher.owned.async_hint`)
share; each says its own hint.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

#: flags a researcher may try for asynchronous SGD, a shards' setting (distconv-launch's too)
ASYNC_WORDS = ("--async", "--mode", "--staleness", "--max-staleness", "--max_staleness")
#: what ``distconv train`` says of them: where asynchronous SGD is set
ASYNC_HINT = (
    "asynchronous SGD is the shards' setting: distconv pserver --mode async --max-staleness S, "
    "or distconv-launch local (or k8s) --mode async --max-staleness S"
)
#: what a ``--mode`` of another value than async is told: the shards train so unasked
SYNC_HINT = "synchronous SGD is the shards' default"


def asks_async(argv: Sequence[str]) -> bool:
    """Whether ``argv`` (``distconv train`` arguments) holds a flag a researcher tries for
    asynchronous SGD (:data:`ASYNC_WORDS`, alone or as ``--flag=value``), or asks ``--sync``,
    the transport, for it (``--sync async``, ``--sync=Asynchronous``: no transport's name).
    The word ``async`` as another flag's value (``--out async``) asks nothing."""

    def tried(word: str, after: str) -> bool:
        named, given, _ = async_flag(word, after)
        asked = given.lower().startswith("async")
        valued = named in ("--sync", "--mode")  # '--mode sync' asks the shards' default
        return word.startswith("-") and ((named in ASYNC_WORDS and not valued) or asked and valued)

    return any(map(tried, argv, [*argv[1:], ""]))


def sync_asked(argv: Sequence[str]) -> str | None:
    """The words of ``argv`` (``distconv train`` arguments) that give the shards' ``--mode``
    another value than async (``--mode sync``, ``--mo=sync``, a bare ``--mode``), as typed;
    None where none do. Synchronous SGD is the shards' default: no flag asks for it."""
    for word, after in zip(argv, [*argv[1:], ""]):
        named, given, takes = async_flag(word, after)
        if word.startswith("-") and named == "--mode" and not given.lower().startswith("async"):
            return f"{word} {given}" if takes else word
    return None


def mode_hint(argv: Sequence[str], hint: str) -> str:
    """What a refusal of ``argv`` (train arguments) says of the shards' mode: ``hint`` (where
    asynchronous SGD is set) where ``argv`` asks for it (:func:`asks_async`); that synchronous
    SGD is the shards' default, and to drop the words, where they give ``--mode`` another
    value (:func:`sync_asked`: ``--mode sync`` was told where async is set); else ``""``."""
    if asks_async(argv):
        return hint
    words = sync_asked(argv)
    return f"{SYNC_HINT}: drop {words}" if words else ""


def async_flag(word: str, after: str) -> tuple[str | None, str, bool]:
    """``word`` (of train arguments, ``after`` the next one or ``""``) read as a flag:
    :func:`async_word` of its name, its value (``--mode=async``'s, or the next word's where
    that is one: ``--staleness -4`` takes the ``-4``, ``--mode --epochs`` none) and whether
    the value is the next word. ``--async`` takes none. The one reading of :func:`asks_async`,
    :func:`sync_asked` and the launcher's hint (:mod:`launcher.async_launch`)."""
    flag, eq, value = word.partition("=")
    named = async_word(flag)
    value_next = bool(after) and value_word(after)
    takes = not eq and named != "--async" and value_next
    return named, value if eq else after if takes else "", takes


#: how argparse tells a negative number (``-4``, ``-.5``; not ``-1e3``) from an option: its own
#: matcher, which differs between Python versions
_NEGATIVE = argparse.ArgumentParser()._negative_number_matcher


def value_word(word: str) -> bool:
    """Whether argparse reads ``word`` as a value, not an option: it does not start with ``-``,
    is ``-`` alone, a negative number (:data:`_NEGATIVE`) or holds a space but names no option
    of ``distconv train`` (:func:`_names_an_option`: argparse asks that first)."""
    if not word.startswith("-") or word == "-" or _NEGATIVE.match(word):
        return True
    return " " in word and not _names_an_option(word)


def _names_an_option(word: str) -> bool:
    """Whether argparse reads ``word`` (starting with ``-``) as one of ``distconv train``'s
    options, whatever follows: ``--epochs=a b`` by its name before ``=``, ``-q y`` by its
    first two characters, ``--epo=a b`` by the start of one before ``=`` (argparse's
    abbreviations; ``--epo x``, with no ``=``, starts no option's name, and is a value)."""
    from distconv.train_args import train_options  # which imports this module

    options = train_options()
    name = word.partition("=")[0]
    short = not word.startswith("--") and word[:2] in options
    return name in options or short or any(o.startswith(name) for o in options)


def async_word(flag: str) -> str | None:
    """The word of :data:`ASYNC_WORDS` or ``--sync`` that argparse would read ``flag`` as,
    were the async words ``distconv train``'s: itself, or the one that a long ``flag`` is
    the start of among those and train's options (``--mo`` is ``--mode``, ``--syn`` is
    ``--sync``), as :func:`distconv.train_args.spelled_out` spells train's own; else None
    (``--ep``, train's ``--epochs``; ``--s``, several). ``--max_staleness`` counts as
    ``--max-staleness``, one flag of two spellings."""
    from distconv.train_args import train_options  # which imports this module

    options = train_options() | set(ASYNC_WORDS)
    if flag in options:
        matches = [flag]
    elif flag.startswith("--") and flag != "--":  # only long options are abbreviated
        matches = [o for o in options if o.startswith(flag)]
    else:
        return None
    named = {o.replace("_", "-") for o in matches}
    word = min(matches) if len(named) == 1 else None
    return word if word in (*ASYNC_WORDS, "--sync") else None


def refuse_own_unknowns(p: argparse.ArgumentParser, hint: str = ASYNC_HINT) -> None:
    """Make ``p`` (``distconv train``'s parser) refuse what it does not take, with its own
    usage: argparse hands a subcommand's leftovers to the top-level parser, whose usage
    (``distconv [-h] ... COMMAND``) told nothing. Any refusal of arguments that ask for
    asynchronous SGD (:func:`asks_async`: ``--mode async`` unrecognized, ``--sync async`` no
    transport's name) ends with ``hint`` in brackets; ``""`` adds none, for a caller that
    says its own (the launcher)."""
    known = p.parse_known_args

    def parse_known_args(args=None, namespace=None):
        from distconv.train_args import spelled_out  # which imports this module

        # looked up when called: parse_train_values sets an instance's error, its hook
        refuse = p.error
        given = sys.argv[1:] if args is None else args
        # spelled out ('--syn async' is '--sync async'), as the launcher hears its train args
        told = hint and mode_hint(spelled_out(given, lenient=True), hint)
        said = f" ({told})" if told else ""
        p.error = lambda message: refuse(message + said)  # argparse's hook for every refusal
        try:
            parsed, extra = known(args, namespace)
            if extra:
                p.error(f"unrecognized arguments: {' '.join(extra)}")
        finally:
            p.error = refuse
        return parsed, extra

    p.parse_known_args = parse_known_args
