"""The line a launch stopped by a signal ends with, where its job id was the launcher's own
choice: how to go on with that run (:func:`go_on_hint`). The same command again picks a new
job id, so a new, empty run directory, and ``--resume`` there finds no checkpoint."""

from __future__ import annotations

import argparse
import signal

#: the statuses of a launch that a stop signal ended (Ctrl-C, SIGTERM)
STOPPED = (128 + signal.SIGINT, 128 + signal.SIGTERM)


def go_on_hint(args: argparse.Namespace, job_id: str, status: int) -> str | None:
    """``to go on with this run: ...`` for a launch that ``status`` says a stop signal ended,
    whose job id (``job_id``) and run directory the launcher chose (no ``--job-id``, no
    ``--run-dir`` in ``args``); None otherwise."""
    if status not in STOPPED or args.job_id is not None or args.run_dir is not None:
        return None
    return (
        f"to go on with this run, give the same command --job-id {job_id} "
        "(and --resume after --, where the program takes it)"
    )
