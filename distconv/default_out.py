"""The output directory ``distconv train`` picks when ``--out`` is not given, and what a resume
into it says.

The name is made of ``--data``, ``--optimizer`` and ``--seed`` (``runs/digits-adam-seed0``), so a
resume that changes one of them looks in another directory: ``--resume`` found "no complete
checkpoint" in a directory the user never named, and ``--resume auto`` trained a fresh run there
from scratch, saying only where it wrote. Both now name the default and the runs beside it.
No other setting names it either: a sweep over ``--lr`` that left ``--out`` to its default met
its first point's run (still going, or done) and was steered to ``--overwrite``, which deleted
it; the refusals now say that a run of its own ``--out`` keeps both.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from distconv.checkpoint import CheckpointError
from distconv.held_run import differences_from
from distconv.resume import fresh_start_said
from distconv.run_dir import RunDirError
from distconv.run_listing import not_resumable_now, out_flags, resumable_runs

log = logging.getLogger(__name__)

#: the folder (under the working directory) that holds the default output directories
RUNS = "runs"


def default_out(data: str, optimizer: str, seed: int) -> str:
    """The output directory of a run given no ``--out``: ``runs/<data>-<optimizer>-seed<seed>``."""
    return os.path.join(RUNS, f"{data}-{optimizer}-seed{seed}")


@contextmanager
def resume_into_default(out: str, resume: bool | str, made_of: str) -> Iterator[None]:
    """Around the chief's training into the default ``out`` (``made_of``: the flags its name
    comes from): where ``out`` does not exist, log that ``--resume auto`` trains a fresh run
    (in place of the setup's own line of it: :data:`~distconv.resume.fresh_start_said`), and
    say ``--resume``'s refusal of it anew, naming ``made_of`` and the runs beside it. The
    refusal itself stays the setup's, which tells the other ranks of it at once (a parameter
    server job's workers): one made before the setup left them waiting a minute for the chief.
    Its refusal of ``out`` in use, or holding a run, says too that no other setting names
    ``out``, and how to keep both runs (a sweep over ``--lr``: :func:`_of_another_setting`).

    Raises:
        CheckpointError: the setup refused ``--resume`` (True), ``out`` not being there.
        RunDirError: the setup refused ``out``, in use or holding a run, or otherwise.
    """
    told = resume == "auto" and not os.path.lexists(out)
    if told:
        log.info(
            "--resume auto: no run in %s: training a fresh run%s",
            _named(out, made_of),
            _others(out),
        )
    said = fresh_start_said.set(told)  # the setup's own line, of the same fact: not again
    try:
        yield
    except RunDirError as exc:  # in use, or holding a run: of a sweep's other point?
        raise exc if resume is True else _of_another_setting(exc, out, made_of) from None
    except CheckpointError as exc:
        # the setup's "--resume: no complete checkpoint in ...": not a later error of a run
        # whose folder went meanwhile
        if resume is not True or os.path.lexists(out) or not str(exc).startswith("--resume: "):
            raise
        raise CheckpointError(
            f"--resume: no run in {_named(out, made_of)} (a resumed run keeps the data, "
            f"optimizer and seed it began with){_others(out)}"
        ) from None
    finally:
        fresh_start_said.reset(said)


def _named(out: str, made_of: str) -> str:
    return f"{out}, the default --out for {made_of}"


def _of_another_setting(exc: RunDirError, out: str, made_of: str) -> RunDirError:
    """``exc``, the setup's refusal of the default ``out`` (made of ``made_of``), as a sweep
    needs it: where a run holds ``out`` (:attr:`~distconv.run_dir.RunDirError.ours`) or is
    still going there (``holder``), that no other setting names it, and how to keep both
    runs; where that run's settings differ from this one's, which, and not ``--resume`` (which
    refuses another run), nor ``--overwrite`` unless to delete it. Any other refusal as it is
    (and every refusal of ``--resume``, which asked for the run there, not another).
    """
    if exc.holder is None and exc.ours is None:
        return exc
    keep_both = "give this run its own --out to keep both"
    default = f"{out} is the default --out for {made_of}, whatever --lr and other settings say"
    if exc.holder is not None:
        return RunDirError(f"{exc}; {default}: {keep_both}", holder=exc.holder)
    differ = differences_from(Path(out), exc.ours)
    if not differ:  # the same settings: resuming it may be what was meant
        deletes = "--overwrite deletes that run"
        return RunDirError(f"{exc}; {default}: {keep_both} ({deletes})", ours=exc.ours)
    return RunDirError(
        f"{out} already holds a run of other settings ({'; '.join(differ)}), which no resume "
        f"continues: {default}; {keep_both} (--overwrite deletes that run)",
        ours=exc.ours,
    )


def _others(out: str) -> str:
    """``; runs/ holds runs to resume: pass --out runs/a or --out runs/L1/train (newest
    first)``, the runs of both layouts (:func:`~distconv.run_listing.resumable_runs`: a
    launch's is its ``train/``), then those whose checkpoints link to a disk not there
    (:func:`~distconv.run_listing.unmounted_runs`), or '' where ``runs/`` holds no other run."""
    runs = [run for run in resumable_runs(RUNS) if run.out != out]
    said = f"; {RUNS}/ holds runs to resume: pass {out_flags(runs)} (newest first)" if runs else ""
    return said + not_resumable_now(RUNS, but=out)
