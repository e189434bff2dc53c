"""The line a launch stopped by a signal ends with: how to go on with that run
(:func:`go_on_hint`). Where the launcher chose the job id, the same command again picks a new
one, so a new, empty run directory, and the line names the id to add; where the command names
its run (``--job-id``, ``--run-dir``), the same command finds it again, but the program refuses
a run directory that holds a run unless ``--resume`` follows ``--``, so the line still says so.
A worker's own signal ends the launch as that worker's failure, with a checkpoint: its report
says how to go on too (:func:`go_on_after_stop`). So does every other failure's, once its cause
is fixed, after naming the newest checkpoint the run kept, read from the run's
``<out>/checkpoints`` as a resume reads it (:func:`way_on_after_failure`): a crash (a SIGKILL, a
full disk, a NaN) left the operator to list that folder and to work out the command."""

from __future__ import annotations

import argparse
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .commands import has_option, option_value
from .failure import Failure

#: the stop signals after which a run may go on (Ctrl-C, a scheduler's SIGTERM)
GOES_ON_AFTER = (signal.SIGINT, signal.SIGTERM)


def go_on_hint(
    args: argparse.Namespace,
    job_id: str,
    status: int,
    stopped_by: int | None,
    train: Sequence[str] | None = None,
) -> str | None:
    """``to go on with this run: ...`` for a launch that the stop signal ``stopped_by`` (the
    launcher's own: not a child's exit 130 or death by SIGTERM) ended with its status
    (``status``); None otherwise. It names the job id (``job_id``) only where the launcher
    chose it (no ``--job-id``, no ``--run-dir`` in ``args``: :func:`names_its_run`).
    ``--resume auto``, not ``--resume``: a stop before the first checkpoint left nothing to
    resume, and the run starts afresh. ``train``: the ``distconv train`` arguments after
    ``--`` (None: another program), whose ``--overwrite`` the way on replaces."""
    if stopped_by not in GOES_ON_AFTER or status != 128 + stopped_by:
        return None
    return _go_on(None if names_its_run(args) else job_id, train)


def names_its_run(args: argparse.Namespace) -> bool:
    """Whether the launch's own options name its run directory (``--job-id`` or ``--run-dir``
    in ``args``): the same command then finds the run again, with no ``--job-id`` added."""
    return args.job_id is not None or args.run_dir is not None


def _go_on(job_id: str | None, train: Sequence[str] | None = None) -> str:
    """``to go on with this run, give the same command --job-id J (...)``; without
    ``--job-id`` where ``job_id`` is None (the command names its job id or run directory
    itself: a ``--job-id`` it gave, said again, read as one it lacked). Where the train
    arguments ``train`` hold ``--overwrite``, ``--resume auto`` in its place: the same command
    deleted the run it stopped, and with ``--resume auto`` added it was refused (both)."""
    again = f" --job-id {job_id}" if job_id is not None else ""
    if train is not None and has_option(train, "--overwrite"):
        return (
            f"to go on with this run, give the same command{again} with --resume auto in place "
            "of --overwrite after -- (--overwrite deletes the run)"
        )
    return (
        f"to go on with this run, give the same command{again} (and --resume auto after --, "
        "where the program takes it)"
    )


def go_on_after_stop(
    failure: Failure, job_id: str | None, train: Sequence[str] | None = None
) -> str | None:
    """How to go on after a child's checkpointed stop (:attr:`Failure.checkpointed`: its exit
    143 or 130, or a worker's death by a later SIGTERM or SIGINT, after a rank's ``stopped ...
    after step N`` line), which the launcher reports as that child's failure: who got the
    signal, at which step the ranks stopped with a checkpoint, and the command that goes on
    (with ``--job-id job_id`` where the launcher chose the run directory; None: the command
    names it: :func:`names_its_run`; ``train``: the ``distconv train`` arguments, whose
    ``--overwrite`` it replaces, as :func:`go_on_hint` does); None for any other failure. A
    signal to the workers, not to the launcher, so :func:`go_on_hint` is silent there."""
    said = failure.checkpointed
    if said is None:
        return None
    return (
        f"a checkpointed stop, not a crash: {said.who(failure.role, failure.rank)}, and the "
        f"ranks stopped together after step {said.step} with a checkpoint; {_go_on(job_id, train)}"
    )


@dataclass(frozen=True)
class WayOn:
    """Where a failed run stands and how it goes on: what ``failure.json`` adds to the failure
    (:meth:`fields`) and the line its report ends with (:attr:`line`)."""

    #: the step of the newest complete checkpoint the run kept; None where it kept none, or
    #: where the program is not ``distconv train`` (its checkpoints are not known)
    checkpoint_step: int | None
    #: that checkpoint's chief part (the file a resume loads first), or None
    checkpoint: str | None
    #: the command that goes on, in the words of a stop's (:func:`_go_on`)
    go_on: str
    #: what the report says of the checkpoint (none kept, or why none can be told); None for a
    #: program that is not ``distconv train``
    kept: str | None
    #: whether the job's update diverged: its way on is a new run, which fixes the cause
    diverged: bool = False

    @property
    def line(self) -> str:
        """``the newest checkpoint kept is step 20 (PATH); once the cause is fixed, to go on
        with this run, give the same command ...``."""
        kept = f"{self.kept}; " if self.kept is not None else ""
        return f"{kept}{'' if self.diverged else 'once the cause is fixed, '}{self.go_on}"

    def fields(self) -> dict[str, object]:
        """The fields ``failure.json`` carries: ``checkpoint_step``, ``checkpoint``, ``go_on``."""
        return {"checkpoint_step": self.checkpoint_step, "checkpoint": self.checkpoint,
                "go_on": self.go_on}  # fmt: skip


#: the way on after a divergence (:attr:`launcher.failure.Failure.diverged`): the same command
#: with ``--resume auto`` diverges again at the same step, and with a lower ``--lr`` it is
#: refused (another learning rate is another run), as the ranks' NaN error says
#: (:data:`distconv.epoch_tally.DIVERGED_WAY_OUT`)
DIVERGED_GO_ON = (
    "to go on, start a new run with a lower --lr from the weights of a checkpoint before the "
    "divergence: the same command with another --job-id (or --run-dir), and --init-from PATH "
    "and the lower --lr after -- (--resume with another --lr is refused), or start afresh"
)
#: the same where the train arguments name their own ``--out``: the new run's must be another,
#: as the same one holds the diverged run and is refused ("already holds a run")
DIVERGED_GO_ON_OWN_OUT = DIVERGED_GO_ON.replace(
    "and --init-from PATH", "and another --out, --init-from PATH"
)
#: the same for a program that is not ``distconv train``, whose flags are not known
DIVERGED_GO_ON_PROGRAM = (
    "to go on, start a new run with a lower learning rate from the weights of a checkpoint "
    "before the divergence, or afresh (a resume with another learning rate is refused)"
)
#: the way on after a divergence where the run kept no checkpoint: no earlier weights to start
#: from, and a resume with none starts afresh, another --lr and all (``--overwrite``: the
#: same command with it and ``--resume auto`` is refused)
DIVERGED_AFRESH = (
    "to go on, start afresh with a lower --lr: the same command with --resume auto and the "
    "lower --lr after --"
)
DIVERGED_AFRESH_OVERWRITE = (
    "to go on, start afresh with a lower --lr: the same command with the lower --lr after --"
)
#: what the report adds to the newest checkpoint after a divergence, before the steps kept
MAY_HAVE_DIVERGED = (
    "; it may already hold diverged weights, finite but far too large (from such weights even "
    "a far lower --lr diverges at once): take an earlier one"
)


def way_on_after_failure(
    job_id: str | None,
    train: Sequence[str] | None,
    diverged: bool = False,
    run_dir: Path | None = None,
) -> WayOn:
    """Where the run of a failed launch stands: the newest complete checkpoint in the ``--out``
    of its ``distconv train`` arguments ``train`` (the launcher adds one where they have none:
    :func:`~launcher.commands.with_out`), read as a resume reads it
    (:func:`~distconv.checkpoint_scan.kept_checkpoint`), and the command that goes on from it
    (as a stop's: :func:`_go_on`, with ``--job-id job_id`` where the launcher chose it, None
    where the command names its run). ``train`` None: another program, whose checkpoints are
    not known; only the command is said. Where the job's update ``diverged``, the way on is a
    new run with a lower learning rate (:data:`DIVERGED_GO_ON`), not the same command, into
    another ``--out`` where ``train``'s is not the one the launcher adds in ``run_dir``; where
    the run kept no checkpoint, a fresh start with a lower one (:data:`DIVERGED_AFRESH`)."""
    # here, not at the top: the scan's modules load numpy, which a launch that never fails
    # (and every refusal of its flags) need not wait for
    from distconv.checkpoint_manifest import CHIEF
    from distconv.checkpoint_scan import NONE_KEPT, kept_checkpoint
    from distconv.run_files import CHECKPOINTS

    out = None if train is None else option_value(train, "--out")
    go_on = _diverged_go_on(train, out, run_dir) if diverged else _go_on(job_id, train)
    if out is None:
        return WayOn(None, None, go_on, None, diverged)
    newest, kept = kept_checkpoint(Path(out) / CHECKPOINTS)
    if newest is None:
        if diverged and kept == NONE_KEPT:  # no earlier weights; --resume auto starts afresh
            go_on = _diverged_afresh(train)
        return WayOn(None, None, go_on, kept, diverged)
    if diverged:
        kept += MAY_HAVE_DIVERGED + _steps_kept(Path(out) / CHECKPOINTS)
    return WayOn(newest.step, str(newest.part(CHIEF)), go_on, kept, diverged)


def _diverged_go_on(train: Sequence[str] | None, out: str | None, run_dir: Path | None) -> str:
    """The way on after a divergence: :data:`DIVERGED_GO_ON_PROGRAM` for a program, else
    :data:`DIVERGED_GO_ON`, or :data:`DIVERGED_GO_ON_OWN_OUT` where ``out`` is the train
    arguments' own (not ``run_dir/train``, :func:`~launcher.commands.with_out`'s)."""
    if train is None:
        return DIVERGED_GO_ON_PROGRAM
    own = out is not None and (run_dir is None or Path(out) != Path(run_dir) / "train")
    return DIVERGED_GO_ON_OWN_OUT if own else DIVERGED_GO_ON


def _diverged_afresh(train: Sequence[str] | None) -> str:
    """:data:`DIVERGED_AFRESH`, or :data:`DIVERGED_AFRESH_OVERWRITE` where the train arguments
    ``train`` hold ``--overwrite`` (which starts afresh itself, and refuses ``--resume``)."""
    overwrites = train is not None and has_option(train, "--overwrite")
    return DIVERGED_AFRESH_OVERWRITE if overwrites else DIVERGED_AFRESH


def _steps_kept(root: Path) -> str:
    """`` (steps 1, 2 kept in ROOT)``: the complete checkpoints in ``root``, for a choice of an
    earlier one; ``""`` where they cannot be told (the newest was, a moment ago)."""
    from distconv.checkpoint import CheckpointReadError
    from distconv.checkpoint_scan import scan_checkpoints

    try:
        steps = [str(m.step) for m in scan_checkpoints(root)[0]]
    except (CheckpointReadError, OSError):
        return ""
    return f" (steps {', '.join(steps)} kept in {root})" if steps else ""
