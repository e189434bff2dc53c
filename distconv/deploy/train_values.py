"""The ``distconv train`` arguments a job's manifests pass to every rank, read once by
``distconv train``'s own parser when they are rendered (:func:`distconv.deploy.render_manifests`),
as ``distconv-launch k8s`` reads them, and by :func:`distconv.deploy.manifest_problems` in
manifests edited by hand: a value it refuses (``--epochs -1``, ``--out`` without one) would stop
every rank of every restart, after the job was applied."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NoReturn

from distconv.train_args import parse_train_values, train_parser


class TrainArgsError(ValueError):
    """The renderer's refusal of the ``distconv train`` arguments after ``--`` alone, raised
    once the launch's own flags have passed: ``distconv-launch k8s`` says it as a usage error
    (exit 2), as ``distconv-launch local`` says the same slip, where any other refusal of the
    renderer (``--job-name``, ``--servers``) is a failed launch (exit 1)."""


def refuse_train_values(argv: Sequence[str]) -> None:
    """Parse ``argv`` (after ``train``, flags spelled out) with ``distconv train``'s parser.

    Raises:
        TrainArgsError: argparse's message, naming the flag; also for ``-h``/``--help``, whose
            help and exit 0 no rank should run for a job.
    """
    problem = train_values_problem(argv)
    if problem is not None:
        raise TrainArgsError(f"{problem} (the train arguments after --)")


def train_values_problem(argv: Sequence[str]) -> str | None:
    """Why ``distconv train`` would refuse ``argv`` (after ``train``, flags spelled out), in
    argparse's words naming the flag, or None; ``-h``/``--help`` too, which prints the help
    and exits 0 instead of training."""
    try:
        parse_train_values(argv, _raise, "-h/--help prints the help and exits: no rank trains")
    except _Refused as exc:
        return str(exc)
    return None


def without_unknown(argv: Sequence[str], unknown: Callable[[str], bool]) -> list[str] | None:
    """``argv`` (after ``train``, flags spelled out) less each flag whose value is ``unknown``,
    one only the cluster knows (``--seed $(SEED)``, ``--seed=$(SEED)``), so that the others'
    values are still judged; None where such a token follows no flag that takes a value: it may
    be a flag itself, and the parse cannot be told."""
    takes_value = {s for a in train_parser()._actions if a.nargs != 0 for s in a.option_strings}
    kept: list[str] = []
    for token in argv:
        name = token.split("=", 1)[0]
        if not unknown(token):
            kept.append(token)
        elif not (name.startswith("--") and "=" in token and not unknown(name)):
            if not kept or kept[-1] not in takes_value:
                return None
            kept.pop()  # the flag before it: --seed $(SEED)
    return kept


class _Refused(Exception):
    """argparse's complaint, raised instead of printed with an exit."""


def _raise(message: str) -> NoReturn:
    raise _Refused(message)
