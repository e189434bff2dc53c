"""Which leading words of a command name the launch's own program, ``distconv train``, rather
than a program of the user's: ``train``, ``distconv train``, ``distconv -q train``, ``python3
-m distconv train``, or ``distconv`` alone or before a flag. After ``--`` they are dropped and
the rest read as train arguments (:func:`launcher.commands.parse_program`); before it, the
usage hint says to drop them (:mod:`launcher.usage_hint`). ``distconv`` before another of its
commands (``distconv keys out``) is a program of the user's."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sysconfig
from collections.abc import Sequence

from distconv.verbosity import is_own_option

_PYTHON = re.compile(r"python(3(\.\d+)?)?")


def launch_words(args: Sequence[str]) -> list[int] | None:
    """The indices of the leading words of ``args`` that name ``distconv train``, to drop: []
    where none do (train arguments start with a flag, or another program comes first), None
    where ``distconv`` names another of its commands (a program of the user's). A ``-q`` or
    ``-v`` between ``distconv`` and ``train`` is kept, as is any form of them distconv takes
    there (``--verb``, ``-vv``: :func:`~distconv.verbosity.is_own_option`): they are train's
    too, and ``-- -q --epochs 1`` is the working form."""
    if not args:
        return []
    if args[0] == "train":
        return [0]
    start = _distconv_words(args)
    if not start:
        return []
    at = start
    while at < len(args) and is_own_option(args[at]):
        at += 1
    if at == len(args) or args[at].startswith("-"):  # 'distconv --epochs 1': train's default
        return list(range(start))
    return [*range(start), at] if args[at] == "train" else None


def train_arguments(args: Sequence[str]) -> tuple[str, ...] | None:
    """``args`` (what follows ``--``) as ``distconv train`` arguments, the words naming it
    dropped (:func:`launch_words`); None where they name a program of the user's."""
    drop = launch_words(args)
    if drop is None or not (drop or not args or args[0].startswith("-")):
        return None
    # '-vv' is '-v' to distconv train's parser, which takes it; the launch reads its flags one
    # to a word (distconv.train_args.spelled_out), and refused it as a flag train takes not
    return tuple(_once(w) for i, w in enumerate(args) if i not in drop)


def _once(word: str) -> str:
    """``word`` with a repeated ``-q`` or ``-v`` (``-vv``, ``-qqq``) said once."""
    return word[:2] if re.fullmatch(r"-v+|-q+", word) else word


def not_a_program(word: str, after: Sequence[str] = ()) -> str:
    """What to say of ``word``, first after ``--`` (``after`` the words after it), that is
    neither a program nor a flag: the likelier slip is a train flag's dashes left out
    (``-- epochs 2``), whose fix is named where ``word`` is a train flag's name
    (:func:`dashed`: ``-- --batch-size 32``)."""
    from .shown import shown

    start = f"{shown(word)} is neither a program on PATH nor a .py file; distconv train arguments"
    flag = dashed(word)
    if flag is None:
        return f"{start} start with an option, e.g. -- --epochs 2"
    from distconv.async_hint import value_word

    from .usage_hint import takes_value

    # '-- lr -0.1' too; not '-- overwrite x', a flag that takes none ('--overwrite x' refused)
    takes = bool(after) and value_word(after[0]) and takes_value(flag)
    value = list(after[:1]) if takes else []
    return f"{start} start with an option: did you mean -- {shlex.join([flag, *value])}?"


def dashed(word: str) -> str | None:
    """The ``distconv train`` option ``word`` names with its dashes left out (``epochs`` is
    ``--epochs``, ``batch_size`` ``--batch-size``); None where it names none."""
    if not re.fullmatch(r"[A-Za-z][\w-]*", word):
        return None
    from distconv.train_args import train_options  # numpy and all: only for such a slip

    options = train_options()
    return next((f for f in (f"--{word}", f"--{word.replace('_', '-')}") if f in options), None)


def flag_slip(args: Sequence[str], elsewhere: bool = False) -> str | None:
    """Why ``args`` (what follows ``--``, a program's words) are refused as a usage error
    before anything starts, wherever the program runs: a first word that is no program on
    this host's ``PATH`` and no path, but a train flag's name with its dashes left out
    (``-- epochs 2``; :func:`not_a_program` names the fix); None otherwise. A program named
    so that is on ``PATH`` here runs: it is the user's. Where the ranks run ``elsewhere``
    (mpi over other hosts), a program of that name only they have is named the way it runs:
    by its path (``-- /path/to/seed``), which is no slip."""
    word = args[0]
    if reads_as_program(word) or dashed(word) is None:
        return None
    slip = not_a_program(word, args[1:])
    if not elsewhere:
        return slip
    from .shown import shown

    # the word is no path and no name on PATH here: only its path reaches the nodes' own file
    path = shlex.quote(os.path.join(os.sep, "path", "to", word))
    return f"{slip} (a program {shown(word)} on the other hosts is started by its path: -- {path})"


def names_a_path(word: str) -> bool:
    """Whether ``word``, first after ``--``, names a file by its path (``./run.sh``) or a
    ``.py`` script, not a program to look up on ``PATH``."""
    return word.endswith(".py") or os.sep in word


def reads_as_program(word: str) -> bool:
    """Whether ``word``, first after ``--``, reads as a program wherever its file is: a path or
    a ``.py`` file (:func:`names_a_path`; k8s's is in the image, mpi's on other hosts), or a
    name on this host's ``PATH``; else the likelier slip is a train flag's dashes left out.
    :func:`launcher.startable.missing_here` asks more of a path: that its file is here."""
    return names_a_path(word) or shutil.which(word) is not None


def _distconv_words(args: Sequence[str]) -> int:
    """How many first words of ``args`` run distconv: 1 for ``distconv``, 3 for ``python3 -m
    distconv`` (any python), else 0."""
    if is_distconv(args[0]):
        return 1
    python = _PYTHON.fullmatch(os.path.basename(args[0])) is not None
    return 3 if python and list(args[1:3]) == ["-m", "distconv"] else 0


def is_distconv(word: str) -> bool:
    """Whether ``word`` runs this install's ``distconv``: the bare word, or a path (``$(which
    distconv)``, ``.venv/bin/distconv``, a link to it) to the same file as the one the bare
    word runs on ``PATH`` or as the console script this Python installed (in its scripts
    folder); not another install's, a copy of it, nor a program of another name. A pyenv shim
    (``~/.pyenv/shims/distconv``, the same file for every Python version) is this install's
    where ``pyenv which distconv`` names this Python's console script
    (:func:`launcher.pyenv_shim.shim_target`), and only then; pyenv's other shims are not."""
    from .pyenv_shim import read_shim, shim_name, shim_target

    if word == "distconv":
        return True
    if os.sep not in word:  # another name on PATH: a program of the user's
        return False
    script = os.path.join(sysconfig.get_path("scripts"), "distconv")
    shim = read_shim(word)  # read once: whether it is a shim, then what pyenv is asked of
    if shim is not None:  # it runs pyenv's choice: that file decides
        # pyenv is asked of its distconv shim alone: '-- ~/.pyenv/shims/python3 x.py' waited
        # on it (twice a launch, up to the bound each) for a program no other name can be
        named = shim_name(word) == "distconv"  # the name it runs: a link's, not its file's
        return named and _same(shim_target(word, shim), script)
    return _same(word, shutil.which("distconv")) or _same(word, script)


def _same(word: str | None, script: str | None) -> bool:
    """Whether ``word`` and ``script`` are one file (links resolved: the file, not the name);
    False where either is None, not there or out of reach."""
    if word is None or script is None:
        return False
    try:
        return os.path.samefile(word, script)
    except OSError:
        return False
