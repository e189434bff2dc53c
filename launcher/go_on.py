"""The line a launch stopped by a signal ends with, where its job id was the launcher's own
choice: how to go on with that run (:func:`go_on_hint`). The same command again picks a new
job id, so a new, empty run directory, and ``--resume`` there finds no checkpoint."""

from __future__ import annotations

import argparse
import signal

#: the stop signals after which a run may go on (Ctrl-C, a scheduler's SIGTERM)
GOES_ON_AFTER = (signal.SIGINT, signal.SIGTERM)


def go_on_hint(
    args: argparse.Namespace, job_id: str, status: int, stopped_by: int | None
) -> str | None:
    """``to go on with this run: ...`` for a launch that the stop signal ``stopped_by`` (the
    launcher's own: not a child's exit 130 or death by SIGTERM) ended with its status
    (``status``), whose job id (``job_id``) and run directory the launcher chose (no
    ``--job-id``, no ``--run-dir`` in ``args``); None otherwise. ``--resume auto``, not
    ``--resume``: a stop before the first checkpoint left nothing to resume, and the run
    starts afresh."""
    if stopped_by not in GOES_ON_AFTER or status != 128 + stopped_by:
        return None
    if args.job_id is not None or args.run_dir is not None:
        return None
    return (
        f"to go on with this run, give the same command --job-id {job_id} "
        "(and --resume auto after --, where the program takes it)"
    )
