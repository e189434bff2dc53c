"""A ``--resume`` in the train arguments of a launch whose run directory is new: refused before
anything starts (:func:`refuse_resume_in_a_new_run_dir`).

Each launch without ``--job-id`` or ``--run-dir`` picks a new job id, so a new, empty run
directory, whose ``train/`` ``distconv train`` writes to unless given its own ``--out``. A
``--resume`` there found nothing: every worker failed with ``... does not exist
(resume=True in a script)``, saying nothing of the job id, and left a ``runs/launch-*``
holding a ``failure.json``. ``--resume auto`` starts afresh there, as it does anywhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from distconv.run_files import runs_holding

from .commands import Program, UsageError, has_option, parse_train_values
from .shown import shown

#: the runs a refusal names at most, newest first
RUNS_NAMED = 3


def refuse_resume_in_a_new_run_dir(
    args: argparse.Namespace, program: Program, runs: str = "runs"
) -> None:
    """Refuse ``program`` (what follows ``--``, read by :func:`.commands.parse_program`) where
    it is ``distconv train`` asked to ``--resume`` (not ``auto``) in the run directory, with no
    ``--out`` of its own, and ``args`` name no ``--job-id`` or ``--run-dir``: the run
    directory, ``runs/<job-id>``, is this launch's new one.

    Raises:
        UsageError: saying to pass the ``--job-id`` or ``--run-dir`` of the launch that began
            the run, and naming the run directories under ``runs`` that hold a ``train/``.
    """
    if not program.is_train or args.job_id is not None or args.run_dir is not None:
        return
    if has_option(program.argv, "--out") or parse_train_values(program.argv).resume is not True:
        return
    raise UsageError(
        "--resume after -- goes on with the run in the run directory's train/, and without "
        "--job-id or --run-dir this launch makes a new, empty run directory: pass the --job-id "
        f"(or --run-dir) of the launch that began the run; {_runs_held(Path(runs).absolute())}"
    )


def _runs_held(runs: Path) -> str:
    """``'runs' holds 'K2', 'J1' (newest first)``: the run directories under ``runs`` that
    hold a ``train/``, by its last change, :data:`RUNS_NAMED` at most; or that it holds none."""
    names = [shown(name) for name in runs_holding(runs, "train")]
    if not names:
        return f"{shown(runs)} holds no run directory with a train/ in it"
    more = len(names) - RUNS_NAMED
    listed = ", ".join(names[:RUNS_NAMED]) + (f" and {more} more" if more > 0 else "")
    return f"{shown(runs)} holds {listed} (newest first)"
