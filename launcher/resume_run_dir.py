"""A resume in the train arguments of a launch whose run directory is new
(:func:`check_resume_in_a_new_run_dir`): ``--resume`` is refused before anything starts, and
``--resume auto`` is warned of where ``runs/`` holds runs it could have meant.

Each launch without ``--job-id`` or ``--run-dir`` picks a new job id, so a new, empty run
directory, whose ``train/`` ``distconv train`` writes to unless given its own ``--out``. A
``--resume`` there found nothing: every worker failed with ``... does not exist
(in a script: resume=True)``, saying nothing of the job id, and left a ``runs/launch-*``
holding a ``failure.json``. ``--resume auto`` starts afresh there, as it does anywhere, and so
trained a run moved from ``distconv train`` (``runs/<name>``, no ``train/``) from scratch
without a word: it is now warned of where ``runs/`` holds runs to resume. The refusal, and
that warning, name the runs of both layouts, each with its way on: a launch's ``--job-id``,
or the ``--out`` of a run ``distconv train`` began.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from distconv.run_listing import (
    NAMED_RUNS,
    ResumableRun,
    not_resumable_now,
    out_flags,
    resumable_runs,
)
from distconv.short_lists import short_list

from .commands import Program, UsageError, has_option, parse_train_values
from .go_on import names_its_run
from .json_lines import json_lines
from .messages import Messages
from .shown import shown
from .stdout import binary_stream


def check_resume_in_a_new_run_dir(
    args: argparse.Namespace, program: Program, runs: str = "runs"
) -> None:
    """Refuse ``program`` (what follows ``--``, read by :func:`.commands.parse_program`) where
    it is ``distconv train`` asked to ``--resume`` in the run directory, with no ``--out`` of
    its own, and ``args`` name no ``--job-id`` or ``--run-dir``: the run directory,
    ``runs/<job-id>``, is this launch's new one. Asked to ``--resume auto`` there, warn instead
    (on stderr, as the launcher's other lines) where ``runs`` holds runs to resume, or runs
    whose checkpoints link to a disk not mounted yet: the job trains a fresh run.

    Raises:
        UsageError: saying to pass the ``--job-id`` or ``--run-dir`` of the launch that began
            the run, naming the run directories under ``runs`` whose ``train/`` holds
            checkpoints, and the ``--out`` of each run there that ``distconv train`` began.
    """
    if not program.is_train or names_its_run(args):
        return
    if has_option(program.argv, "--out"):
        return
    resume = parse_train_values(program.argv).resume
    if resume not in (True, "auto"):
        return
    held, unmounted = resumable_runs(runs), not_resumable_now(runs)
    if resume is True:
        raise UsageError(
            "--resume after -- goes on with the run in the run directory's train/, and without "
            "--job-id or --run-dir this launch makes a new, empty run directory: pass the "
            "--job-id (or --run-dir) of the launch that began the run; "
            + _ways_on(runs, held, unmounted, "--resume")
        )
    # none: a first launch, which --resume auto lets restarts go on with; a run whose disk is
    # not mounted yet is one the user meant, trained afresh here without a word
    if held or unmounted:
        _warn(
            program,
            "--resume auto after -- goes on only with a run in this launch's new run "
            "directory, which holds none: this job trains a fresh run. To go on with a run "
            "there is, pass the --job-id (or --run-dir) of the launch that began it; "
            + _ways_on(runs, held, unmounted, "--resume auto"),
        )


def _ways_on(runs: str, held: list[ResumableRun], unmounted: str, resume: str) -> str:
    """``'/w/runs' holds 'K2', 'J1' (newest first)``: the launches' run directories of
    ``held`` (the runs in ``runs``), :data:`~distconv.run_listing.NAMED_RUNS` at most (or that
    it holds none), then the ``--out`` after ``--`` (with ``resume``, the flag as given) that
    goes on with each run ``distconv train`` began there, where there is one; then
    ``unmounted``, the runs whose checkpoints link to a disk not mounted yet, not resumable now
    (:func:`~distconv.run_listing.not_resumable_now` of ``runs``, asked once by the caller)."""
    launches = [run for run in held if run.launched]
    began_by_train = [run for run in held if not run.launched]
    said = f"{shown(Path(runs).absolute())} holds {_launches(launches)}"
    if began_by_train:
        flags = out_flags(began_by_train, after=f" {resume}")
        said += f"; for a run distconv train began, pass its --out after --: {flags}"
    return said + unmounted


def _launches(launches: list[ResumableRun]) -> str:
    """``'K2' (running, pid 7 on vm), 'J1' (newest first)``, or that there are none."""
    if not launches:
        return "no run directory with checkpoints in its train/"
    names = [shown(run.name) + run.marked for run in launches]
    return f"{short_list(names, NAMED_RUNS)} (newest first)"


def _warn(program: Program, text: str) -> None:
    """``text`` as the launcher's warning, before its job and run directory are made: a JSON
    object where the train arguments ask for ``--log-format json``, as the job's lines."""
    Messages(binary_stream(sys.stderr), json_lines(program.argv, None)).say(text, "warning")
