"""Which start of which job a process is, and how a restart tells the run its launch began.

A restart (``DISTCONV_RESTART`` above 0) given no ``--resume``, or given ``--overwrite``,
continues the run its own launch (``DISTCONV_LAUNCH``) began and no other
(:meth:`~distconv.resume.StepCheckpoints.open`). Each checkpoint's manifest records the job id
and launch that wrote it, and the newest complete one tells. Before the first is complete, the
run's claim tells: ``<out>/run.claim``, the job id and launch that a fresh run records when it
takes the directory (:meth:`JobStart.claim`). Without it, a first start that died after writing
run files (its first epoch's metrics line, a step directory whose manifest never came) left
files its restart could not tell from another run's, and the restart was refused. A directory
without a claim (an earlier distconv's) names no launch, and such files are refused as before.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from distconv.checkpoints_link import mount_record
from distconv.files import describe_os_error, write_atomically
from distconv.launch_env import launch_id, restart_count
from distconv.run_dir import CLAIM, RunDirectory, RunDirError

log = logging.getLogger("distconv.checkpoint")

#: who began a run: its job id and launch token (either None where it had none)
Began = tuple[str | None, str | None]


@dataclass(frozen=True)
class JobStart:
    """Which start of which job a process is, by which a restart given no ``--resume`` or
    ``--overwrite`` tells the run its own launch began
    (:meth:`~distconv.resume.StepCheckpoints.open`).

    Attributes:
        job_id: the job's id (``DISTCONV_JOB_ID``), written into each manifest; None for none.
        launch: the ``distconv-launch`` invocation (``DISTCONV_LAUNCH``), written into each
            manifest too: a user may launch a job id again, and a launch is one.
        restart: how many times that launch has started the job again (``DISTCONV_RESTART``).
    """

    job_id: str | None = None
    launch: str | None = None
    restart: int = 0

    @classmethod
    def from_environment(cls) -> JobStart:
        """This start as ``distconv-launch`` tells any program it starts (``DISTCONV_LAUNCH``,
        ``DISTCONV_RESTART``), without a job id: what a script's Trainer, given no ``start``,
        records, so that its restart (``resume`` False or ``"overwrite"``) continues the run
        its launch began.

        Raises:
            RuntimeConfigError: ``DISTCONV_RESTART`` is not an integer >= 0.
        """
        return cls(None, launch_id(), restart_count())

    def restarts_run_in(self, run: RunDirectory) -> bool:
        """Whether this is a restart of the launch that began the run in ``run``: the launch
        that wrote its newest complete checkpoint, or where none is complete, the one its claim
        names (a start without a launch token never is)."""
        if not self.restart or self.launch is None:
            return False
        newest = run.latest()
        began = claimed_by(run) if newest is None else (newest.job, newest.launch)
        return began == (self.job_id, self.launch)

    def claim(self, run: RunDirectory) -> None:
        """Record this start's job id and launch as those that began the fresh run it starts in
        ``run`` (whose lock it holds), in place of an earlier run's claim, and the mount point
        its ``checkpoints`` links to (:func:`~distconv.checkpoints_link.mount_record`).

        Raises:
            RunDirError: the claim cannot be written (a full or read-only disk), naming it.
        """
        path = run.root / CLAIM
        # a restart on a node where that disk is not mounted yet says so (before any epoch)
        record = {"job": self.job_id, "launch": self.launch, **mount_record(run.checkpoint_root)}
        try:
            write_atomically(path, [json.dumps(record).encode()])
        except OSError as exc:
            raise RunDirError(f"cannot write {path}: {describe_os_error(exc)}") from None


def claimed_by(run: RunDirectory) -> Began | None:
    """The job id and launch that ``run``'s claim names; None where it has none (an earlier
    distconv's run directory) or one that cannot be read (warned): no launch's run, then."""
    path = run.root / CLAIM
    try:
        record = json.loads(path.read_bytes())
        began = (record["job"], record["launch"])  # a TypeError where it is no object
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("not reading the run's claim %s: %s", path, exc)
        return None
    if not all(who is None or isinstance(who, str) for who in began):
        log.warning("not reading the run's claim %s: %r names no job and launch", path, record)
        return None
    return began
