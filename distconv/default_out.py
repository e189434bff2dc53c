"""The output directory ``distconv train`` picks when ``--out`` is not given, and what a resume
into it says.

The name is made of ``--data``, ``--optimizer`` and ``--seed`` (``runs/digits-adam-seed0``), so a
resume that changes one of them looks in another directory: ``--resume`` found "no complete
checkpoint" in a directory the user never named, and ``--resume auto`` trained a fresh run there
from scratch, saying only where it wrote. Both now name the default and the runs beside it.
"""

from __future__ import annotations

import logging
import os

from distconv.checkpoint import CheckpointError
from distconv.run_files import CHECKPOINTS

log = logging.getLogger(__name__)

#: the folder (under the working directory) that holds the default output directories
RUNS = "runs"

#: at most this many other runs are named in a message, newest first
NAMED_RUNS = 3


def default_out(data: str, optimizer: str, seed: int) -> str:
    """The output directory of a run given no ``--out``: ``runs/<data>-<optimizer>-seed<seed>``."""
    return os.path.join(RUNS, f"{data}-{optimizer}-seed{seed}")


def check_resume_into_default(out: str, resume: bool | str, made_of: str) -> None:
    """Before a resume into the default ``out`` that does not exist (the chief's look): refuse
    ``--resume``, and log that ``--resume auto`` starts a fresh run, each naming ``made_of``
    (the flags the name comes from) and the runs beside it. Any other case: nothing.

    Raises:
        CheckpointError: ``resume`` is True and ``out`` does not exist.
    """
    if resume not in (True, "auto") or os.path.lexists(out):
        return
    default = f"{out}, the default --out for {made_of}"
    if resume is True:
        raise CheckpointError(
            f"--resume: no run in {default} (a resumed run keeps the data, optimizer and seed "
            f"it began with){_others(out)}"
        )
    log.info("--resume auto: no run in %s: training a fresh run%s", default, _others(out))


def _others(out: str) -> str:
    """``; runs/ holds A, B: pass --out runs/NAME to resume one of them`` (the newest first),
    or '' where ``runs/`` holds no other run."""
    try:
        with os.scandir(RUNS) as entries:
            runs = [e for e in entries if e.path != out and _is_run(e.path)]
            runs.sort(key=lambda e: e.stat().st_mtime, reverse=True)
    except OSError:  # no runs/ (or unreadable): nothing to name
        return ""
    if not runs:
        return ""
    names = ", ".join(e.name for e in runs[:NAMED_RUNS])
    more = f" and {len(runs) - NAMED_RUNS} more" if len(runs) > NAMED_RUNS else ""
    return f"; {RUNS}/ holds {names}{more}: pass --out {RUNS}/NAME to resume one of them"


def _is_run(path: str) -> bool:
    """Whether ``path`` is an output directory ``--out`` could name: one that holds a
    checkpoints folder (a launcher's run directory under runs/ holds its own ``train/``)."""
    return os.path.isdir(os.path.join(path, CHECKPOINTS))
