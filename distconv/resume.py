"""Step checkpoints of a run: where to resume from, and writing each step's parts.

The chief owns the run directory (:class:`~distconv.run_dir.RunDirectory`): it decides whether
to resume, restores the parameters and returns the optimizer state for the sync strategy to
spread, and writes each checkpoint: the parameters, the optimizer state (gathered through the
sync contract wherever it lives), the position in the data, the epoch's metric sums so far and
the sync's scheme (:func:`~distconv.sync.description.sync_scheme`, in ``extra["scheme"]``).
Nothing else in training is random (the batch order is a function of seed and epoch), so the
position is all a resumed run needs to see exactly the batches an uninterrupted one sees.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distconv import plain_json
from distconv.build_identity import build_id
from distconv.carried_facts import carry_on
from distconv.checkpoint import (
    Checkpoint,
    CheckpointDamaged,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from distconv.checkpoint import CheckpointError as CheckpointError  # its calls raise it
from distconv.checkpoint_checks import as_saved, savable_facts
from distconv.epoch_sums import CARRIED
from distconv.frozen_resume import without_frozen
from distconv.held_run import held_refusal, recorded_facts
from distconv.job_start import JobStart as JobStart  # defined there: trainer, job read it
from distconv.legacy_run import legacy_refusal
from distconv.messages import quoted_in
from distconv.parameter import Parameter
from distconv.resume_facts import (
    FACTS_FORM,
    FACTS_FORM_KEY,
    LAYERS,
    check_resumable,
    recorded,
    warn_of_config_changes,
)
from distconv.run_dir import (
    AUTO_STARTS_AFRESH,
    CHIEF,
    CHIEF_PART,
    LEGACY_CHECKPOINT,
    Manifest,
    RunDirectory,
    RunDirError,
)
from distconv.scheme_history import (
    WORLD_SIZE,
    checkpoint_facts,
    checkpoint_schemes,
    written_under,
)
from distconv.set_rate_resume import rate_set_since
from distconv.step_guard import TrainingError as TrainingError  # trainer, tests read it
from distconv.step_guard import check_step_checkpoint
from distconv.stop_request import Preempted as Preempted  # defined there: the syncs read it
from distconv.sync import SyncStrategy
from distconv.sync.collective_time import timed_collective
from distconv.unrecorded_facts import warn_of_unrecorded

log = logging.getLogger("distconv.resume")

#: True where the caller has said that ``resume="auto"`` trains afresh (:mod:`.default_out`)
fresh_start_said = ContextVar("fresh_start_said", default=False)

OptimState = dict[str, dict[str, Any]]


def dtype_fact(params: Sequence[Parameter], cast: Any = None) -> str:
    """The parameters' real dtypes, as a checkpoint records them: ``"float32"``, or
    ``"float16,float32"`` for a model that mixes them; as they will be cast to ``cast``."""
    return ",".join(sorted({str(p.value.dtype if cast is None else cast) for p in params}))


@dataclass
class Position:
    """Where training stands, and the epoch's metric sums up to the last checkpoint."""

    epoch: int = 0  # epochs completed
    step: int = 0  # optimizer steps taken in all
    step_in_epoch: int = 0
    sums: dict[str, float] = field(default_factory=dict)
    #: the chief's: the schemes of the checkpoint resumed, its epoch's to its step, the last its
    #: own (at an epoch's start, the epoch before's), its scheme None where the checkpoint records
    #: none (an older distconv's); scheme_history.checkpoint_schemes
    schemes: list[dict[str, Any]] = field(default_factory=list)
    #: the chief's: the world size the checkpoint resumed was written on (None: not recorded)
    world_size: int | None = None


class StepCheckpoints:
    """The chief's checkpoints of one run.

    Args:
        run: the run directory (the chief's), or None on other ranks and without files.
        params: every parameter of the model, static ones included.
        sync: the strategy (optimizer config and state go through it).
        facts: what a checkpoint must agree on with this run
            (:data:`~distconv.resume_facts.MUST_MATCH`) and records.
        start: which start of which job this is, recorded in each manifest (None: as the
            environment says it, :meth:`JobStart.from_environment`).
    """

    def __init__(
        self,
        run: RunDirectory | None,
        params: Sequence[Parameter],
        sync: SyncStrategy,
        facts: Mapping[str, Any],
        start: JobStart | None = None,
    ) -> None:
        self.run, self.params, self.sync = run, list(params), sync
        self.facts = savable_facts(facts)  # each checkpoint saves them: refused here
        self.start = start or JobStart.from_environment()
        self._said_nothing = False  # whether the chief said no output directory saves nothing
        self._saved: dict[Any, Any] | None = None  # the facts as saved: _saved_facts
        self._carried: dict[str, Any] = {}  # the facts a restore carried on: carry_on
        # the build each checkpoint records: read now, at the run's start, as the MPI and
        # pserver start-ups read it, not at the first save, when the files may be another's
        build_id()

    def open(
        self,
        resume: bool | str,
        train_data: Mapping[str, Any] | None = None,
        layers: Mapping[str, Any] | None = None,
    ) -> tuple[OptimState | None, Position]:
        """Take the directory and decide: resume (returns the state and position) or start.

        ``train_data`` is the training set's :func:`~distconv.data.fingerprint`: a fact each
        checkpoint records and a resume compares, since a set of another length or content
        would not continue the batch order the checkpoint's position stands in. ``layers`` is
        the network's :meth:`~distconv.network.Network.structure`, recorded and compared alike
        (:data:`~distconv.resume_facts.LAYERS`): another activation or wiring on the same
        parameter shapes is another model on the checkpoint's weights.

        ``resume`` is False (refuse a directory holding a run), True (a checkpoint must exist),
        ``"auto"`` (resume if one exists) or ``"overwrite"`` (delete the previous run first).
        A restart with False or ``"overwrite"`` resumes as ``"auto"`` where the run is its own
        launch's (:meth:`JobStart.restarts_run_in`: the newest complete checkpoint's launch,
        or where none is complete, the claim's): the launch's first start began that run, and
        the restart continues it, or starts afresh over what a first start that died before its
        first checkpoint left. Otherwise it does what its first start did: False refuses any
        other run (a restart once resumed the run its first start had refused), and
        ``"overwrite"`` replaces it, also one of an earlier launch of the same job id. A fresh
        run records this start's job and launch as its claim (:meth:`JobStart.claim`). Each
        names a ``checkpoints`` linked to a disk not there before its first step
        (:meth:`~distconv.run_dir.RunDirectory.check_checkpoints_there`).
        """
        self._saved = None  # a new fit: its config may have changed since the last one's
        if train_data is not None:
            self.facts["train_data"] = dict(train_data)
        if layers is not None:  # a config's own "layers" is kept beside it (OWN_KEYS)
            self.facts[LAYERS] = dict(layers)
        if self.run is None:
            if resume is True and self.sync.is_chief:  # asked to resume, it must not start over
                raise CheckpointError(
                    "resume=True (--resume) needs an output directory (out_dir, --out) to find "
                    "the checkpoint in; none was given"
                )
            if resume in ("auto", "overwrite") and self.sync.is_chief and not self._said_nothing:
                self._said_nothing = True  # once: a loop of fits repeated it at each
                flag = "--resume auto" if resume == "auto" else "--overwrite"
                log.warning(  # or a launcher's --max-restarts trusts it to continue the run
                    f"resume={resume!r} ({flag}) without an output directory (out_dir, --out) "
                    "saves nothing: a restart (distconv-launch --max-restarts) starts it over"
                )
            return None, Position()
        run = self.run
        if resume is True and not os.path.lexists(run.root):  # a mistyped --out: not made
            raise CheckpointError(
                f"--resume: no complete checkpoint in {run.checkpoint_root}: {run.root} does "
                f"not exist: check --out; where it is right, {AUTO_STARTS_AFRESH}"
            )
        run.acquire()
        asked = resume
        if resume in (False, "overwrite") and self.start.restarts_run_in(run):
            resume = "auto"  # the run this launch's first start began: continued
        elif resume == "overwrite":
            run.clear()
            return self._begin(run)
        if resume in (True, "auto"):  # before the scan, which reads a late disk as empty
            run.check_checkpoints_there()
        # scanned only to resume: without --resume, a run here is refused whatever it holds
        complete, problems = run.scan() if resume in (True, "auto") else ([], [])
        if resume in (True, "auto") and complete:
            return self._restore_newest(complete, problems)
        if resume in (True, "auto") and problems:  # never start over a run we cannot read
            raise RunDirError(f"no usable checkpoint in {run.root}: {'; '.join(problems)}")
        if resume in (True, "auto") and (run.root / LEGACY_CHECKPOINT).exists():
            # before "no complete checkpoint": there is one, of another kind
            raise RunDirError(legacy_refusal(run.root))
        if resume is True:
            raise CheckpointError(
                f"--resume: no complete checkpoint in {run.checkpoint_root}; {AUTO_STARTS_AFRESH}"
            )
        if run.holds_legacy_only() and resume != "auto":  # "pass --resume": refused too
            raise RunDirError(legacy_refusal(run.root))
        if run.holds_run() and resume != "auto":
            raise held_refusal(run.root, self._ours())  # with our facts: how that run differs
        if resume == "auto":
            run.clear_unfinished()  # files of a run that never reached its first checkpoint
            if asked == "auto" and not fresh_start_said.get():  # not a restart's own "auto"
                said = "no checkpoint in %s: training a fresh run (in a script: resume='auto')"
                where = quoted_in(str(run.root), [run.root])  # a line break: one line still
                log.info("--resume auto: " + said, where)  # a mistyped --out: days not picked up
        else:  # met at the first save, an epoch's work lost on each attempt; no metrics here
            run.check_checkpoints_there(by_metrics=False)  # (refused above): a plot is no sign
        return self._begin(run)

    def _begin(self, run: RunDirectory) -> tuple[None, Position]:
        """Start a fresh run in ``run``, claimed by this start's job and launch: where it dies
        before its first checkpoint is complete, its restart tells the files it left by that."""
        self._carry_on({})  # an earlier fit's resume carried the facts of another run
        self._saved_facts()  # as the fit's setup holds them (a resume's restore makes them too)
        self.start.claim(run)
        return None, Position()

    def _restore_newest(
        self, complete: list[Manifest], problems: list[str]
    ) -> tuple[OptimState, Position]:
        """Restore the newest checkpoint that loads; say what was skipped on the way.

        Only a damaged file is set aside for the one before it. A read error (EIO, EACCES)
        raises :class:`~distconv.checkpoint.CheckpointReadError` and renames nothing: the file
        may be whole, and an asynchronous run would lose its newer state for good.
        """
        for problem in problems:
            log.warning("skipping a checkpoint: %s", problem)
        for manifest in reversed(complete):
            path = manifest.part(CHIEF)
            try:
                ckpt = load_checkpoint(path)
            except CheckpointDamaged as exc:
                if manifest is complete[0]:
                    raise
                log.warning("%s; setting it aside, trying the checkpoint before it", exc)
                # the run goes on from an older step: a newer manifest left in place would
                # count as the newest when old checkpoints are pruned, and outlive new ones
                self.run.set_aside(manifest)
                continue
            return self.restore(ckpt)
        raise AssertionError("unreachable: the oldest checkpoint raises or returns")

    def _saved_facts(self) -> dict[Any, Any]:
        """The run's facts, each value in the JSON form a checkpoint's ``extra`` keeps it in
        (its key as it is: the save writes keys as before), written once a fit (:meth:`open`
        drops them), not at each save: a value may cost much to write (a sparse tensor is
        coalesced and hashed, about a second at 5M entries). Once a fit is enough: the facts
        are the config the job check compared at the fit's setup, and a resume compares a
        checkpoint's with its own run's at its setup; a change within a fit is seen by neither
        (the job check is not run again), and one between fits is written by the next fit."""
        if self._saved is None:
            self._saved = {key: json.loads(plain_json.dumps(v)) for key, v in self.facts.items()}
        return self._saved

    def _ours(self) -> dict[str, Any]:
        """This run's facts as a checkpoint's read back (:func:`recorded_facts`), to compare."""
        return as_saved({**self._saved_facts(), "optimizer": self.sync.optimizer_config()})

    def record_fact(self, key: str, value: Any) -> None:
        """Record ``value`` under ``key`` in each checkpoint from the next one on."""
        self.facts[key] = value
        self._saved = None  # the facts as saved are made anew at the next save

    def _carry_on(self, extra: Mapping[str, Any]) -> None:
        """Record the facts carried on from a checkpoint's ``extra`` (:func:`carry_on`)."""
        self._carried = carry_on(self.facts, self._carried, extra)
        self._saved = None  # the facts as saved are made anew at the next save

    def close(self) -> None:
        if self.run is not None:
            self.run.release()

    def save(self, pos: Position, sums: Mapping[str, float], scheme: Mapping | None = None) -> None:
        """Write the checkpoint of ``pos.step`` (chief), then let every rank go on. ``scheme``:
        the sync's (:func:`~distconv.scheme_history.checkpoint_facts`; None reads it now).

        The optimizer state is gathered before anything is written (``checkpoint_state``,
        which makes the parameters current too), and the parameters and that state are checked
        after it: an asynchronous parameter server writes the values of the state's moment into
        them, so the values checked are the values written; and a state can overflow while the
        values stay finite (Adam's ``v`` of a gradient past the dtype's range, whose step is 0).

        Raises:
            TrainingError: a parameter or its optimizer state holds NaN or infinity; no write.
            CheckpointError: the step, epoch or a count of the state is no count, or the
                chief's part cannot be written; no part of it is left on the chief's disk, nor
                on a shard's where the chief's part was refused (a shard's own part its disk
                cannot take is a warning: :mod:`distconv.sync.ps.parts`).
        """
        if self.run is not None:
            # the current parameters (an async server's moved by others) and their state
            state = _of_model(self.sync.checkpoint_state(), self.params)
            where = f"of step {pos.step} in {self.run.checkpoint_root}"  # no step directory yet
            seed = self.facts.get("seed")
            check_step_checkpoint(
                self.params, state, step=pos.step, epoch=pos.epoch, seed=seed, where=where
            )
            part = self.run.step_dir(pos.step) / CHIEF_PART
            # a failure discards the step's folder (a folder left in a first epoch made a run
            # of it; a full disk stayed full) and names the checkpoint the run keeps
            with self.run.saving(pos.step):
                # the chief's part first: what its save refuses (the state's counts, a full
                # disk) leaves no part on a shard's disk either
                self._write(part, pos, sums, state, checkpoint_facts(self.sync, pos, scheme))
                # shards prune before the manifest is committed: one part more keeps every part
                # the kept manifests name, even if this process dies between the two
                remote = self.sync.save_remote_parts(pos.step, keep=self.run.keep + 1)
                job, launch = self.start.job_id, self.start.launch
                self.run.commit(pos.step, {CHIEF: part}, remote, job=job, launch=launch)
        # nobody reads a checkpoint the chief is still writing (the others' wait for it, timed)
        timed_collective(self.sync, self.sync.barrier)

    def _write(
        self, part: Path, pos: Position, sums: Mapping[str, float], state: OptimState, schemes: dict
    ) -> None:
        """Write the chief's part of the checkpoint of ``pos``: optimizer ``state``, ``schemes``."""
        save_checkpoint(
            part,
            self.params,
            state,
            step=pos.step,
            epoch=pos.epoch,
            seed=self.facts.get("seed"),
            optimizer=self.sync.optimizer_config(),
            extra={
                **{k: v for k, v in self._saved_facts().items() if k != "seed"},
                FACTS_FORM_KEY: FACTS_FORM,  # numbers typed, the layers: compared as written
                "step_in_epoch": pos.step_in_epoch,
                "sums": {k: sums[k] for k in CARRIED if k in sums},
                **schemes,  # the scheme; the epoch's earlier ones
            },
        )

    def restore(self, source: str | Path | Checkpoint) -> tuple[OptimState, Position]:
        """Load a checkpoint into the parameters; returns its optimizer state and position.

        Raises:
            CheckpointError: the checkpoint does not fit the model (names, shapes, dtypes), or
                comes from a run whose seed, global batch, optimizer, learning-rate decay,
                dtype, data set (its name, or the training set's fingerprint) or model (its
                name, or the network's structure) differ
                (:func:`~distconv.resume_facts.check_same_run`).
        """
        ckpt = source if isinstance(source, Checkpoint) else load_checkpoint(source)
        path = ckpt.path
        theirs = recorded_facts(ckpt)
        ours = rate_set_since(path, theirs, self._ours(), self.sync.optimizer)
        check_resumable(ckpt, self.params, theirs, ours)
        warn_of_config_changes(theirs, ours)  # a script's own: recorded, never refused
        warn_of_unrecorded(path, theirs, ours)  # an older checkpoint's: not compared
        # save_checkpoint's own files record no position in an epoch nor sums: at its start
        in_epoch, sums = int(ckpt.extra.get("step_in_epoch", 0)), ckpt.extra.get("sums", {})
        restore_checkpoint(ckpt, self.params)
        self._carry_on(ckpt.extra)  # a script's config cannot say them again
        schemes = checkpoint_schemes(ckpt.extra, ckpt.step)  # none in an older distconv's
        world = recorded(ckpt.extra, WORLD_SIZE)  # of this form on: a config's before
        world = world if type(world) is int else None
        pos = Position(ckpt.epoch, ckpt.step, in_epoch, sums, schemes, world)
        where = _where_in_epochs(ckpt.epoch, in_epoch)
        log.info("resumed from %s at step %d, %s%s", path, ckpt.step, where, written_under(schemes))
        if self.sync.is_chief and ckpt.build != build_id():  # an upgrade's: no fault, said once
            theirs_said = f"distconv {ckpt.build}" if ckpt.build else "a distconv that records none"
            log.info("%s was written by %s; this is distconv %s", path, theirs_said, build_id())
        return without_frozen(ckpt.optim_state, self.params), pos


def _of_model(state: OptimState, params: Sequence[Parameter]) -> OptimState:
    """The optimizer state of this model's parameters only: a sync that trained another model
    before (a sweep) still holds that one's state under names this model lacks, which a resume
    would refuse."""
    names = {p.name for p in params}
    return {name: s for name, s in state.items() if name in names}


def _where_in_epochs(done: int, in_epoch: int) -> str:
    """Where a checkpoint stands in the epochs as the log numbers them (from 1): ``after epoch
    2`` at an epoch's end, ``5 steps into epoch 3`` inside one. The checkpoint's own ``epoch``
    counts the epochs finished (``done``), so ``at epoch 0`` read as an epoch the log never
    shows."""
    if in_epoch == 0:
        return f"after epoch {done}"
    steps = "step" if in_epoch == 1 else "steps"
    return f"{in_epoch} {steps} into epoch {done + 1}"
