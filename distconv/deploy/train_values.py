"""The ``distconv train`` arguments a job's manifests pass to every rank, read once by
``distconv train``'s own parser when they are rendered (:func:`distconv.deploy.render_manifests`),
as ``distconv-launch k8s`` reads them: a value it refuses (``--epochs -1``, ``--out`` without
one) would stop every rank of every restart, after the job was applied."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from distconv.train_args import train_parser


def refuse_train_values(argv: Sequence[str]) -> None:
    """Parse ``argv`` (after ``train``, flags spelled out) with ``distconv train``'s parser.

    Raises:
        ValueError: argparse's message, naming the flag; also for ``-h``/``--help``, whose
            help and exit 0 no rank should run for a job.
    """

    def refuse(message: str) -> NoReturn:
        raise ValueError(f"{message} (the train arguments after --)")

    if any(a in ("-h", "--help") for a in argv):  # argparse would print the help and exit 0
        refuse("-h/--help renders no manifest; see distconv train --help")
    parser = train_parser()
    parser.error = refuse  # argparse's hook for every refusal; it would print and exit
    parser.parse_args(list(argv))
