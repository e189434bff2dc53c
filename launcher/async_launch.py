"""The launch a refusal of an asynchronous-SGD word after ``--`` (``-- --mode async``) points
to: this launch as the launcher takes it with asynchronous SGD, a command to paste, not the
general :data:`launcher.owned.ASYNC_HINT`. That one named ``distconv-launch local ... --mode
async --max-staleness N``: refused in turn under ``--servers 0`` (no shards to set), and for
its ``N``, no number; and under ``k8s --mpi`` and ``mpi``, whose launch has no shards, it
named none that they take.

The command is rebuilt from the launch's own words (:func:`launcher.options.parse_own` keeps
them): its ``--run-dir``, ``--job-id``, ``--threads``, ``--grace``, ... kept, so that it is
the same run made asynchronous, not another one under a new job id and run directory."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from .commands import UsageError
from .owned import ASYNC_HINT
from .startable import shell_words

#: the train-side spellings of the shards' staleness bound, whose value the launch takes over
_STALENESS = ("--staleness", "--max-staleness", "--max_staleness")
#: per command, its options (dests) that the asynchronous launch sets itself: dropped from
#: its words (k8s: an MPIJob's, which has no shards)
_SET = {
    "local": {"servers", "mode", "max_staleness"},
    "k8s": {"servers", "mode", "max_staleness", "mpi", "slots_per_worker"},
}
#: mpi's options that a local launch takes as they are (the job's, not mpiexec's)
_JOB = {"max_restarts", "grace", "run_dir", "job_id", "threads"}
#: what the hint says before the command
TOLD = "asynchronous SGD is the shards' setting, a flag of the launcher's before --: "
#: what a launch whose workers use the user's own shards (``-- --pservers``) is told, before
#: the staleness bound
OWN_SHARDS = (
    "asynchronous SGD is the setting of the shards --pservers names, which you start: "
    "start each (distconv pserver) with --mode async --max-staleness "
)


def async_launch(args: argparse.Namespace, rest: Sequence[str]) -> list[str]:
    """The command line of the launch ``args`` (``rest``: what followed ``--``) with
    asynchronous SGD: its own words less those it sets, at least one shard (``--servers 0``
    and an MPIJob have none to set), ``--mode async``, the staleness bound given before
    ``--`` or after it (where the launcher takes that value), and the train arguments less the
    words that asked for it (:func:`distconv.async_hint.asks_async`'s: ``--mode async``,
    ``--sync async``, ...). An ``mpi`` launch's is a local one of ``-np`` workers, with the
    job's options (``--run-dir``, ``--grace``, ...)."""
    from .options import PROG

    kept, bound = _train_words(args, rest)
    kept, moved = _taken(kept, args)
    own = list(getattr(args, "own", (args.command,)))
    groups = _option_groups(args.command_parser, own[own.index(args.command) + 1 :])
    groups += [("moved", moved)]  # '-- --job-id j': the launcher's own, as its refusal says
    if args.command == "mpi":
        words = [w for dest, group in groups if dest in {*_JOB, "moved"} for w in group]
        command = [PROG, "local", "--workers", str(args.np), *words, "--servers", "1"]
    else:
        drop = {None, *_SET[args.command]}  # None: a word no option took (the caller's)
        words = [w for dest, group in groups if dest not in drop for w in group]
        servers = 1 if args.servers is None else max(args.servers, 1)
        command = [PROG, args.command, *words, "--servers", str(servers)]
    command += ["--mode", "async"]
    if bound is not None:
        command += ["--max-staleness", str(bound)]
    return command + (["--", *kept] if kept else [])


def _train_words(args: argparse.Namespace, rest: Sequence[str]) -> tuple[list[str], int | None]:
    """``rest`` less the words that ask for asynchronous SGD, and the staleness bound: one
    given after ``--`` that the launcher takes, else the launch's own."""
    from distconv.async_hint import ASYNC_WORDS, async_flag
    from distconv.train_args import spelled_out

    from .options import staleness

    words = spelled_out(rest, lenient=True)  # '--max-stal 3' found by its full name
    kept: list[str] = []
    bound = getattr(args, "max_staleness", None)
    at = 0
    while at < len(words):
        word = words[at]
        # '--mo async' is '--mode async', as asks_async reads it; every --mode is dropped
        named, given, takes = async_flag(word, words[at + 1] if at + 1 < len(words) else "")
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
    return kept, bound


def _taken(words: list[str], args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """``words`` (train arguments, spelled out) less those the async launch, a job with shards
    (its workers' ``--sync pserver``), refuses after ``--`` though ``args`` took them: a
    ``--sync`` (``mpi -np 2 -- --sync mpi``), a flag it sets itself (``--rank``, ...) or of
    another transport (``--bucket-mb``); and the words of its own flags among them
    (``--job-id``, ``--insecure``: a local launch's, which the launch ``args`` lacks)."""
    from distconv.train_args import train_parser

    from .commands import names_a_program
    from .owned import LOCAL_OWNED

    if names_a_program(words):  # a program's arguments, not train's: its own
        return words, []
    kept: list[str] = []
    own: list[str] = []
    for dest, group in _option_groups(train_parser(), words):
        flag = group[0].partition("=")[0]
        if dest is None or (flag not in ("--sync", *LOCAL_OWNED) and _pserver(flag)):
            kept += group
        elif args.command != "k8s" and flag in ("--job-id", "--insecure"):
            if not getattr(args, dest, None):  # the launch's own one kept, not two
                own += group
    return kept, own


def _pserver(flag: str) -> bool:
    """Whether train's ``flag`` does something under pserver sync, the async launch's."""
    from distconv.transport_flags import transports_taking

    return "pserver" in transports_taking(flag)


def _option_groups(
    parser: argparse.ArgumentParser, words: Sequence[str]
) -> list[tuple[str | None, list[str]]]:
    """``words`` (a command's own arguments, which ``parser`` took) in groups, each an option
    with its value (``--grace 5``, ``--grace=5``, ``-n2``) and the dest it sets, read as
    argparse reads them (``--gr 5`` is ``--grace``); None for a word of no option."""
    options = {o: a for a in parser._actions for o in a.option_strings}
    groups: list[tuple[str | None, list[str]]] = []
    at = 0
    while at < len(words):
        action, inline = _option(options, words[at])
        size = 1 if action is None or inline or action.nargs == 0 else 2
        groups.append((action and action.dest, list(words[at : at + size])))
        at += size
    return groups


def _option(options: dict, word: str) -> tuple[argparse.Action | None, bool]:
    """The action ``word`` names and whether its value is in it (``--grace=5``, ``-n2``)."""
    if word in options:
        return options[word], False
    flag, eq, _ = word.partition("=")
    if flag in options:
        return options[flag], bool(eq)
    if flag.startswith("--"):  # argparse's abbreviations, of long options only
        found = {id(a): a for o, a in options.items() if o.startswith(flag)}
        return (next(iter(found.values())), bool(eq)) if len(found) == 1 else (None, False)
    short = word[:2]
    if word.startswith("-") and short in options and len(word) > 2:  # '-n2'
        return options[short], True
    return None, False


def async_retold(error: UsageError, args: argparse.Namespace, rest: Sequence[str]) -> UsageError:
    """``error`` (a refusal of ``rest``, the train arguments after ``--`` of the launch
    ``args``) with its hint of where asynchronous SGD is set naming :func:`async_launch`'s
    command in place of the general one (:func:`async_told`); ``error`` itself where it gives
    no such hint."""
    said = str(error)
    return error if ASYNC_HINT not in said else UsageError(async_told(said, args, rest))


def async_told(said: str, args: argparse.Namespace, rest: Sequence[str]) -> str:
    """``said`` (a refusal of the launch ``args``, ``rest`` after its ``--``) with the general
    :data:`ASYNC_HINT` in it replaced by :func:`async_launch`'s command. An ``mpi`` launch
    over hosts (its own, or a batch system's allocation) has no local launch that is the same
    run: it is told that asynchronous SGD needs parameter-server shards, which mpi starts
    none of (:func:`launcher.mpi.ranks_elsewhere`, the test of its program's refusal too). A
    ``local --servers 0`` launch whose workers train with the user's own shards
    (``--pservers`` after ``--``) is told that it is those shards' setting: a launch with
    new shards in their place would leave them out."""
    if ASYNC_HINT not in said:
        return said
    over_hosts = False
    if args.command == "mpi":
        from .mpi import hosts_elsewhere  # mpi's imports: for this hint of an mpi launch only

        over_hosts = hosts_elsewhere(args)
    if _own_shards(args, rest):  # '--servers 0 -- --pservers h:p': the user's shards
        bound = _train_words(args, rest)[1]
        told = OWN_SHARDS + ("S" if bound is None else str(bound))
    elif over_hosts:
        told = (
            "asynchronous SGD needs parameter-server shards, and distconv-launch mpi starts "
            "none: distconv-launch local (this host) or k8s --mode async"
        )
    else:
        # a word with a line break as its $'...' word: the line stays one, pasted back the same
        told = TOLD + shell_words(async_launch(args, rest))
    return said.replace(ASYNC_HINT, told)


def _own_shards(args: argparse.Namespace, rest: Sequence[str]) -> bool:
    """Whether the launch ``args`` is ``local --servers 0`` and its train arguments ``rest``
    name shards of the user's own (``--pservers``, ``--pserv=...`` as train reads it), whose
    mode their own launch sets. Every other launch refuses ``--pservers``: its hint drops it."""
    from distconv.train_args import spelled_out

    from .commands import names_a_program

    # mpi's ranks (allreduce) and a k8s render (its deployment's shards) refuse --pservers
    # after --: their own hints, which drop it, are the ones they take
    shards = args.command != "local" or args.servers != 0
    if shards or names_a_program(rest):  # a program's arguments are its own
        return False
    return any(w.partition("=")[0] == "--pservers" for w in spelled_out(rest, lenient=True))


@contextmanager
def async_retelling(args: argparse.Namespace, rest: Sequence[str]) -> Iterator[None]:
    """A refusal of the train arguments ``rest`` raised inside, retold by :func:`async_retold`."""
    try:
        yield
    except UsageError as exc:  # '-- --mode async': the hint names this launch, made async
        raise async_retold(exc, args, rest) from None
