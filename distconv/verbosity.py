"""How much a ``distconv`` command logs: ``-q`` (warnings only) or ``-v`` (debug lines too),
given before the command or after it (``distconv -v pserver ...``, ``distconv train -q``)."""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Sequence

#: the options ``distconv`` takes before its command (``distconv -v train``)
OWN_OPTIONS = ("-q", "--quiet", "-v", "--verbose")


def add_verbosity(p: argparse.ArgumentParser, *, quiet_help: str | None = None) -> None:
    """Declare ``-q``/``--quiet`` and ``-v``/``--verbose`` on a parser. On a subcommand's
    (``quiet_help`` None), ``distconv train -q`` means ``distconv -q train``, where users put a
    flag: after the command. SUPPRESS there: ``distconv -q train`` sets it first, and the
    subcommand's default must not undo that."""
    sub = quiet_help is None
    default = argparse.SUPPRESS if sub else False
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default,
        help="log warnings only (as distconv -q)" if sub else quiet_help,
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="log distconv's debug lines too (a parameter-server shard's: each stale push it "
        "drops, each prune of its checkpoint parts)"
        + (" (as distconv -v)" if sub else " (or after the COMMAND)"),
    )


def log_level(args: argparse.Namespace) -> int:
    """The root logger's level ``args`` ask for: WARNING with ``-q``, else INFO (``-v`` too:
    its debug lines are distconv's own, :func:`debug_own_lines`; matplotlib's font search
    alone logged 150 lines a run at DEBUG)."""
    return logging.WARNING if getattr(args, "quiet", False) else logging.INFO


def debug_own_lines(args: argparse.Namespace) -> None:
    """With ``-v``, let distconv's own loggers (``distconv.*``) log their debug lines."""
    if getattr(args, "verbose", False):
        logging.getLogger("distconv").setLevel(logging.DEBUG)


def refuse_both(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A usage error (exit 2) for ``-q`` before the command and ``-v`` after it, or the other
    way round: each parser's own exclusion sees only its own flags."""
    if getattr(args, "quiet", False) and getattr(args, "verbose", False):
        parser.error("argument -v/--verbose: not allowed with argument -q/--quiet")


def is_own_option(word: str) -> bool:
    """Whether ``word``, before a ``distconv`` command, is one of :data:`OWN_OPTIONS` as
    argparse may take it: repeated or joined (``-vv``, ``-qq``; ``-qv``, refused) or a long
    one abbreviated (``--verb``, ``--q``; ``--ver``, ambiguous beside ``--version``)."""
    if re.fullmatch(r"-[qv]+", word):
        return True
    return len(word) > 2 and any(
        long.startswith(word) for long in OWN_OPTIONS if long.startswith("--")
    )


def from_command(argv: Sequence[str]) -> list[str]:
    """``argv`` (a ``distconv`` command line) from its command on, as what reads the command
    before the parse (:func:`~distconv.transport_flags.mpi_train_rank`) must see it: ``-v
    train ...`` is ``train ...``. Every word before it that starts with a dash is read past,
    not only :data:`OWN_OPTIONS` in the forms argparse takes (:func:`is_own_option`): none of
    distconv's options there takes a value, so the first word without one is the command, and
    a rank whose parse failed on another (``--verbose=1``, ``-vx``, a typo) exited without the
    abort, its peers waiting in ``MPI_Init`` until killed."""
    at = 0
    while at < len(argv) and argv[at].startswith("-"):
        at += 1
    return list(argv[at:])
