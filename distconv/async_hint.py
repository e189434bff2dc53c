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


def asks_async(argv: Sequence[str]) -> bool:
    """Whether ``argv`` (``distconv train`` arguments) holds a flag a researcher tries for
    asynchronous SGD (:data:`ASYNC_WORDS`, alone or as ``--flag=value``), or asks ``--sync``,
    the transport, for it (``--sync async``, ``--sync=Asynchronous``: no transport's name).
    The word ``async`` as another flag's value (``--out async``) asks nothing."""

    def tried(word: str, after: str) -> bool:
        flag, eq, value = word.partition("=")
        asked = (value if eq else after).lower().startswith("async")
        named = async_word(flag)
        return word.startswith("-") and (named in ASYNC_WORDS or (named == "--sync" and asked))

    return any(map(tried, argv, [*argv[1:], ""]))


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
        asked = hint and asks_async(spelled_out(given, lenient=True))
        said = f" ({hint})" if asked else ""
        p.error = lambda message: refuse(message + said)  # argparse's hook for every refusal
        try:
            parsed, extra = known(args, namespace)
            if extra:
                p.error(f"unrecognized arguments: {' '.join(extra)}")
        finally:
            p.error = refuse
        return parsed, extra

    p.parse_known_args = parse_known_args
