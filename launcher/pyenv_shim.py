"""Which file a pyenv shim runs: ``~/.pyenv/shims/distconv`` (``$(which distconv)`` where pyenv
manages Python) is a small script that has pyenv pick the Python version of the moment (its
``PYENV_VERSION``, a ``.python-version`` file, the global one) and run that version's
``distconv``. The shim is the same file for every version, so only ``pyenv which`` tells which
install's ``distconv`` it runs (:func:`launcher.train_words.is_distconv`).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: seconds ``pyenv which`` may take: it reads a few files and runs no Python; a pyenv that does
#: not answer in that time leaves the shim a program of the user's, run as it is
WHICH_BOUND = 2.0


class _Launch(threading.local):
    """This thread's launch: a launch is its thread's (a library caller's local job may run
    in one for hours while another thread launches again), so one count and one set of
    answers for the process made every launch begun meanwhile part of that one, which
    forgot no answer while it ran."""

    def __init__(self) -> None:
        #: this thread's ``pyenv which`` answers by question (pyenv, root, name), None for one
        #: that failed, took over :data:`WHICH_BOUND` or was stopped: a launch reads its first
        #: word more than once (parse_program, names_a_program, the last line's), and each
        #: read asked again (a hung pyenv held it twice the bound, one that answered slowly
        #: as long, and two answers could differ); cleared as a launch starts and ends
        #: (:func:`one_launch`)
        self.answers: dict[tuple[str, str, str], str | None] = {}
        #: how many :func:`one_launch` blocks are open: the command line's and its handler's
        self.open = 0


_LAUNCH = _Launch()


def forget() -> None:
    """Forget this thread's ``pyenv which`` answers asked so far (:class:`_Launch`), for a
    caller that reads a launch's words itself (:func:`launcher.commands.parse_program`)
    outside one."""
    _LAUNCH.answers.clear()


@contextmanager
def one_launch() -> Iterator[None]:
    """A launch, in which pyenv is asked each question once: the answers of any before are
    forgotten as the outermost block starts and ends. Only the command line's ``main`` forgot
    them, so a library caller's launches (``launcher.cli.run_local``, ``run_mpi``,
    ``launcher.k8s.run_k8s``, each in one) kept the first answer for the process's life, after
    the user switched pyenv versions; a handler's block within ``main``'s is the same launch
    (its usage errors read the words before the handler). A context manager and a decorator
    (``@one_launch()``); of the thread it runs in, as a launch is (:class:`_Launch`)."""
    launch = _LAUNCH
    if launch.open == 0:
        forget()
    launch.open += 1
    try:
        yield
    finally:
        launch.open -= 1
        if launch.open == 0:
            forget()


#: what marks a file as a shim pyenv wrote (``pyenv rehash``): the root it exports and the
#: pyenv it execs, ``$(command -v pyenv)`` at the time, which is the install's own
#: ``libexec/pyenv``: under ``$PYENV_ROOT`` for a git clone, elsewhere for Homebrew's
#: (``/opt/homebrew/Cellar/pyenv/2.4.0/libexec/pyenv``) or a root set apart from the install
_SHIM = re.compile(rb'^export PYENV_ROOT="([^"\n]+)"$.*?^exec "([^"\n]+)" exec ', re.M | re.S)


def read_shim(path: str) -> tuple[str, str] | None:
    """The root and the pyenv program of the pyenv shim ``path`` (links resolved): a file in
    the ``shims`` folder of the root it exports that execs ``pyenv exec``, as every shim pyenv
    writes does (the root: not ``$PYENV_ROOT`` or ``~/.pyenv`` as this environment has them);
    None for any other file. Read once for both questions, whether it is a shim and which file
    it runs (:func:`shim_target`'s ``shim``)."""
    real = os.path.realpath(path)
    try:
        with open(real, "rb") as file:
            text = file.read(4096)
    except OSError:
        return None
    found = _SHIM.search(text)
    if found is None:
        return None
    root, pyenv = (os.fsdecode(group) for group in found.groups())
    if os.path.dirname(real) != os.path.join(os.path.realpath(root), "shims"):
        return None
    return root, pyenv


def shim_name(path: str) -> str:
    """The program a pyenv shim started as ``path`` asks pyenv for: the name it is started by
    (``program="${0##*/}"``, the shim's first step), not its file's: a link ``~/bin/dc`` to
    ``shims/distconv`` runs ``pyenv exec dc``, and a link ``distconv`` to ``shims/python3``
    runs ``pyenv exec distconv``."""
    return os.path.basename(path)


def shim_target(path: str, shim: tuple[str, str] | None = None) -> str | None:
    """The file the pyenv shim ``path`` runs here (``pyenv which NAME`` in this environment and
    folder, which the launch's children inherit, with the root the shim exports), or None:
    ``path`` is no shim (:func:`read_shim`), or pyenv names none, fails or takes over
    :data:`WHICH_BOUND`; asked once a launch (:class:`_Launch`), a stop while it is asked
    (:class:`launcher.interrupt.Interrupted`) leaving the answer None for the launch. ``shim``:
    :func:`read_shim` of ``path`` already, not read again (a file replaced between two reads
    answered of another file than the one judged a shim)."""
    if shim is None:
        shim = read_shim(path)
    if shim is None:
        return None
    root, pyenv = shim  # the program the shim execs, as it does
    asked, answers = (pyenv, root, shim_name(path)), _LAUNCH.answers
    if asked not in answers:  # once a launch (its words are read more than once)
        # None first: a stop that ends the asking (Interrupted) leaves it asked; the stopped
        # launch's last line reads the words again, and waited on pyenv anew
        answers[asked] = None
        answers[asked] = _which(*asked)
    return answers[asked]


def _which(pyenv: str, root: str, name: str) -> str | None:
    """``pyenv which NAME`` of the pyenv program ``pyenv`` with the root ``root``, as a shim
    runs it: the file it names, or None where it names none, fails or takes over
    :data:`WHICH_BOUND` (killed with what it started)."""
    from .interrupt import run_captured  # a stop signal never leaves pyenv running

    try:
        # its group killed past the bound: what pyenv started (its hooks') outlived it
        done = run_captured(
            [pyenv, "which", name],
            timeout=WHICH_BOUND,
            env={**os.environ, "PYENV_ROOT": root},
            kill_group=True,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip()
    return found if done.returncode == 0 and os.path.isabs(found) else None
