"""The launch a ``distconv-launch local`` refusal of an asynchronous-SGD word after ``--``
(``-- --mode async``) points to: this launch as the launcher takes it with asynchronous SGD,
a command to paste, not the general :data:`launcher.owned.ASYNC_HINT`. That one named
``distconv-launch local ... --mode async --max-staleness N``: refused in turn under
``--servers 0`` (no shards to set), and for its ``N``, no number."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence

from .commands import UsageError
from .owned import ASYNC_HINT

#: the train-side spellings of the shards' staleness bound, whose value the launch takes over
_STALENESS = ("--staleness", "--max-staleness", "--max_staleness")


def async_launch(args: argparse.Namespace, rest: Sequence[str]) -> list[str]:
    """The command line of the local launch ``args`` (``rest``: what followed ``--``) with
    asynchronous SGD: its workers, at least one shard (``--servers 0`` has none to set),
    ``--mode async``, the staleness bound given before ``--`` or after it (where the launcher
    takes that value), and the train arguments less the words that asked for it
    (:func:`distconv.async_hint.asks_async`'s: ``--mode async``, ``--sync async``, ...)."""
    from distconv.async_hint import ASYNC_WORDS, async_word
    from distconv.train_args import spelled_out

    from .options import PROG, staleness

    words = spelled_out(rest, lenient=True)  # '--max-stal 3' found by its full name
    kept: list[str] = []
    bound = args.max_staleness
    at = 0
    while at < len(words):
        word = words[at]
        flag, eq, value = word.partition("=")
        after = words[at + 1] if at + 1 < len(words) else ""
        value_next = bool(after) and (not after.startswith("-") or after[1:2].isdigit())
        named = async_word(flag)  # '--mo async' is '--mode async', as asks_async reads it
        takes = not eq and named != "--async" and value_next  # '--staleness -4' takes the -4
        given = value if eq else after if takes else ""
        asks = named in ASYNC_WORDS or (named == "--sync" and given.lower().startswith("async"))
        if not (word.startswith("-") and asks):
            kept.append(word)
            at += 1
            continue
        if named in _STALENESS:
            try:  # a bound the launcher refuses is left out: the hint names an accepted launch
                bound = staleness(given)
            except (argparse.ArgumentTypeError, ValueError):
                pass
        at += 2 if takes else 1
    command = [PROG, "local", "--workers", str(args.workers), "--servers", str(args.servers or 1)]
    command += ["--mode", "async"]
    if bound is not None:
        command += ["--max-staleness", str(bound)]
    return command + (["--", *kept] if kept else [])


def async_retold(error: UsageError, args: argparse.Namespace, rest: Sequence[str]) -> UsageError:
    """``error`` (a refusal of ``rest``, the train arguments after ``--`` of the local launch
    ``args``) with its hint of where asynchronous SGD is set naming :func:`async_launch`'s
    command in place of the general one; ``error`` itself where it gives no such hint."""
    said = str(error)
    if ASYNC_HINT not in said:
        return error
    launch = shlex.join(async_launch(args, rest))
    told = "asynchronous SGD is the shards' setting, a flag of the launcher's before --: "
    return UsageError(said.replace(ASYNC_HINT, told + launch))
