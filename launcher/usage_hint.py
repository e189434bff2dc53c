"""Where the arguments go that no option of a ``distconv-launch`` command took: the hint of its
usage error (:func:`unrecognized`), which runs the launch's own checks on what it would put
after ``--`` (:func:`refused`). :func:`launcher.options.parse_own` calls it."""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Callable, Mapping, Sequence

from distconv.messages import shell_word

from .options import PROG
from .owned import async_hint, refuse_after_dashes
from .shown import shown
from .train_words import is_distconv, launch_words


def unrecognized(
    own: Sequence[str],
    extra: Sequence[str],
    rest: Sequence[str],
    options: Sequence[str] = (),
    owned: Mapping[str, str] | None = None,
    refused: Callable[[Sequence[str]], str | None] = lambda after: None,
    values: Mapping[str, str] | None = None,
    given: Mapping[str, str] | None = None,
    elsewhere: bool = False,
) -> str:
    """argparse's refusal of ``extra``, the arguments of ``own`` no option took, and where the
    first is a ``distconv train`` flag (``--epochs`` before ``--``, the likeliest slip), where
    they go: the command again with them after ``--`` (before ``rest``, what followed it, or
    after it where it names a program of the user's, whose arguments they then are). A flag
    of neither, spelled nearly as one of ``options`` (the command's own), is that one
    mistyped: it is named, not sent after the program (``--max-restrts 2 -- job.py``). A
    program (or ``train``) before a ``--`` left out is shown after one; a program before a
    ``--`` given, first after it (``./run.sh -- --epochs 1``), and ``train`` (or
    ``distconv``) there is said to be the launch's own program, to drop, as ``distconv``
    (``distconv train``) is where ``--`` was left out. A train flag the
    launch sets itself (``owned``: flag -> why) is said so, not sent after ``--``, where it
    was refused in turn (``mpi -np 2 --rank 1``). Where the launch would refuse what the hint
    puts after ``--`` (``refused``: why, or None), that is said instead of the hint. A value
    one of the command's own options takes (``values``: value -> its flag) is that option's,
    its flag left out (``local --workers 2 sync``), though a command on PATH is named so too
    (``/usr/bin/sync``), unless that flag is given (``given``: flag -> as given, ``--mode
    async sync``): then it is a stray word, no program either. A lone bare word on PATH
    (``test``) may be a program or a stray value: it is shown after ``--`` only if it is the
    program to run. Where the launch's ranks run ``elsewhere`` (mpi over other hosts:
    :func:`launcher.mpi.ranks_elsewhere`), a path missing here is a program all the same, as
    after ``--`` (:func:`launcher.commands.parse_program`)."""
    from distconv.messages import shell_quoted
    from distconv.train_args import FlagError, full_flag  # numpy and all: on this error only

    from .commands import names_a_program

    # on one line, as the launcher's other lines show a value that breaks one
    said = " ".join(w if w.isprintable() else shell_quoted(w) for w in extra)
    said = f"unrecognized arguments: {said}"
    if extra[0] in (values or {}):  # '--mode' left out, whatever PATH holds of that name
        flag = values[extra[0]]
        if flag in (given or {}):  # '--mode async sync': not left out, a word too many
            return f"{said} ({flag} is given already: {given[flag]})"
        return f"{said} (did you mean {flag} {extra[0]}?)"
    program = names_a_program(rest)
    # a word first: the program (or the word train) where -- was forgotten, or put before it
    leading = _program_word(extra[0], elsewhere)
    own, n = list(own), len(extra)
    at = [i for i in range(len(own) - n + 1) if own[i : i + n] == list(extra)]
    ahead = own[: at[0]] + own[at[0] + n :] if len(at) == 1 else [*own[:1], "..."]

    def command(after: Sequence[str]) -> str:  # the launch again, ``after`` after ``--``
        dashes = ["--", *after] if after else []  # 'distconv' alone: train's defaults
        return " ".join(w if w == "..." else shell_word(w) for w in [PROG, *ahead, *dashes])

    # 'train -- --epochs 1': no program to run; nor 'distconv train --epochs 1', -- left out
    # ('train --epochs 1' is train's arguments as they are: -- train --epochs 1 takes them)
    # ('distconv -q train': the -q kept, train's too; 'distconv keys': a program of the user's)
    runs = (launch_words(extra) or []) if rest or is_distconv(extra[0]) else []
    if runs:
        kept = [word for i, word in enumerate(extra) if i not in runs]
        why = refused([*kept, *rest])
        drop = f"not after -- either: {why}" if why else command([*kept, *rest])
        drop = f"drop {' '.join(extra[i] for i in runs)} ({drop})"
        if program:  # '-- ./run.sh' after it, which runs instead
            return f"{said} (the program after -- runs instead of distconv train: {drop})"
        other = "" if own[0] == "k8s" else ", or put a program after --"  # k8s renders train's
        return f"{said} (the launcher runs distconv train itself: {drop}{other})"
    try:
        flag = full_flag(extra[0])
        if flag in (owned or {}) and not program:  # a program of the user's may take it
            return f"{said} (distconv train's {flag}, which this launch sets: {owned[flag]})"
    except FlagError:  # not distconv train's either (or not a flag): argparse's words alone
        close = difflib.get_close_matches(extra[0].split("=", 1)[0], options, n=1, cutoff=0.8)
        if close and extra[0].startswith("-"):
            return f"{said} (did you mean {close[0]}?)"
        if not (leading or (program and extra[0].startswith("-"))):
            told = async_hint(extra)[2:]  # 'mpi ... --mode async' ('--mode sync': the default)
            return f"{said} ({told})" if told else said
    # a program of the user's after --, its arguments before it; a program before it, first
    after = [*rest, *extra] if program and not leading else [*extra, *rest]
    again = command(after)
    why = refused(after)  # '--epochs 1 job.py': job.py is no train argument after -- either
    if why:
        first = None if program else _program_first(extra, rest, values or {}, elsewhere)
        if first is not None and refused(first) is None:  # its arguments put before it
            where = f"goes first after --, its arguments after it: {command(first)}"
            if _bare(first[0]):  # 'test' on PATH: perhaps a stray value, as below
                return f"{said} (if {shown(first[0])} is the program to run, it {where})"
            return f"{said} (a program {where})"
        return f"{said} (not after -- either: {why})"
    if leading and names_a_program(extra):
        if len(extra) == 1 and _bare(extra[0]):
            return f"{said} (if {shown(extra[0])} is the program to run, it goes after --: {again})"
        return f"{said} (a program goes after --: {again})"
    where = "after its name, after --" if program else "after --"
    whose = "the program's" if program else "distconv train's"
    also = "" if program or len(at) != 1 else _own_after(own, at[0] + n, options)
    return f"{said} ({whose} arguments go {where}: {again}{also})"


#: (command, flag): what a flag of the command's own means where ``distconv train`` takes
#: one of that name for something else
OTHER_MEANING = {("k8s", "--out"): "k8s's own, the folder its manifests are written to"}


def _own_after(own: Sequence[str], start: int, options: Sequence[str]) -> str:
    """``"; "`` and a note where ``own[start:]``, what followed the train arguments, gives a
    flag of the command's own that train takes too, meaning another thing (:data:`OTHER_MEANING`):
    ``k8s ... --epochs 1 --out /opt/x``, a ``--`` forgotten, wrote the manifests into /opt/x,
    the workers' run folder the likelier wish; else ``""``."""
    for word in own[start:]:
        name = word.split("=", 1)[0]  # as argparse reads it: in full, or a prefix of one flag
        full = [o for o in options if o == name] or [o for o in options if o.startswith(name)]
        if name.startswith("--") and len(full) == 1 and (own[0], full[0]) in OTHER_MEANING:
            meaning = OTHER_MEANING[own[0], full[0]]
            return (
                f"; the {full[0]} after them was read as {meaning}: if it was meant for the "
                "workers, it goes after -- too"
            )
    return ""


def choice_values(
    parser: argparse.ArgumentParser, own: Sequence[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Each value a choice option of the command ``parser`` takes (``--mode``'s sync and
    async) -> its flag, and each such flag given in ``own`` (the command's arguments, parsed
    again) -> how: ``--mode sync``, the default typed, counts as given (``set_by_operator``
    cannot tell it from none), as do ``--mode=async`` and ``--mo async``."""
    actions = [a for a in parser._actions if a.choices]
    unset = object()  # argparse leaves a preset attribute alone where its flag is absent
    parsed, _ = parser.parse_known_args(own, argparse.Namespace(**{a.dest: unset for a in actions}))
    values, given = {}, {}
    for action in actions:
        flag = max(action.option_strings, key=len)
        values.update(dict.fromkeys(action.choices, flag))
        if getattr(parsed, action.dest) is not unset:
            given[flag] = f"{flag} {getattr(parsed, action.dest)}"
    return values, given


def refused(args: argparse.Namespace, after: Sequence[str]) -> str | None:
    """Why the launch ``args`` would refuse ``after`` as what follows ``--`` (the checks
    :func:`launcher.cli.run_local` and ``run_mpi`` make before anything starts:
    :func:`launcher.owned.refuse_after_dashes`); None if it takes it. A program named there
    is not looked for (a script the launch does not see may exist where it runs), but one of
    this host that mpi's ranks, or local's workers, cannot start is refused. A k8s render is
    checked whole (:func:`launcher.k8s.checked_manifests`): it takes no program, and refuses
    the flags it sets; None where it refuses the launch's own flags without them (their
    error, not the train arguments')."""
    from .commands import LaunchError, Program, names_a_program, parse_program

    try:
        if args.command == "k8s":
            from .k8s import checked_manifests

            try:  # the launch's own flags first: a render they fail blames no train argument
                checked_manifests(args, [])
            except LaunchError:
                return None  # the usual hint: its own flags' error comes at the next try
            checked_manifests(args, after)
            return None
        if names_a_program(after):
            program = Program(tuple(after), is_train=False)
        else:
            program = parse_program(after)
        refuse_after_dashes(args, program)  # './data.csv': no program, though a file with a '/'
    except LaunchError as exc:
        return str(exc)
    return None


def _program_first(
    extra: Sequence[str], rest: Sequence[str], values: Mapping[str, str], elsewhere: bool
) -> list[str] | None:
    """What goes after ``--`` where a program of ``extra`` (not its first word) comes after
    its own arguments (``--epochs 1 job.py``): the program first, then the rest of ``extra``
    and ``rest``; None where no later word reads as a program (:func:`_program_word`), a
    value of the command's own options (``values``) none, though on PATH (``sync``), nor the
    value of the train flag before it (``--out test``: /usr/bin/test)."""
    for i, word in enumerate(extra[1:], 1):
        if word == "train" or word in values or takes_value(extra[i - 1]):
            continue
        if _program_word(word, elsewhere):
            return [word, *extra[:i], *extra[i + 1 :], *rest]
    return None


def takes_value(word: str) -> bool:
    """Whether ``word`` is a ``distconv train`` flag that takes the next word as its value
    (``--out``, ``--ou``; not ``--overwrite``, nor ``--out=x``, which holds its own)."""
    from distconv.train_args import FlagError, full_flag, train_parser

    if not word.startswith("-") or "=" in word:
        return False
    try:
        flag = full_flag(word)
    except FlagError:  # no flag of train's: whether it takes one cannot be told
        return False
    return any(flag in a.option_strings and a.nargs != 0 for a in train_parser()._actions)


def _bare(word: str) -> bool:
    """Whether ``word``, read as a program, is a lone name found on PATH (``test``, ``time``):
    as likely a stray value as a program; not a path or a script's name."""
    return os.sep not in word and not word.endswith(".py")


def _program_word(word: str, elsewhere: bool = False) -> bool:
    """Whether ``word`` reads as a program (or ``train``) put before ``--``: a script's name
    or a program :func:`launcher.commands.parse_program` would run (a path only the other
    hosts may have too, where the ranks run ``elsewhere``, and this one lacks); not a stray
    value (``-np 2 4``), nor a folder or data file beside it (``runs``, ``./set.npz``),
    refused after ``--``."""
    from .commands import LaunchError, parse_program
    from .startable import is_program_file

    if word == "train" or word.endswith(".py"):
        return True
    if word.startswith("-"):
        return False
    here = os.sep in word and os.path.exists(word)  # a bare word is a PATH program's name
    try:
        # a path (/opt/on-nodes/prog) the other hosts may have; a bare word missing here is
        # likelier a stray value than a program on their PATH alone
        program = parse_program([word], elsewhere and os.sep in word and not here)
    except LaunchError:
        return False
    # a file this host has (a shared /home) is the other hosts' program only where it reads
    # as one (its execute bit, a #! line): a data file beside the launch is no one's
    return not (elsewhere and here and not is_program_file(program.argv[0]))
