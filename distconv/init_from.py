"""A new run started from another run's weights: ``distconv train --init-from PATH``.

Fine-tuning, or going on with a lower learning rate, is a new run: step 0, fresh optimizer
state, a fresh schedule, only the weights taken from a checkpoint. A resume refuses a
checkpoint whose settings differ (:mod:`distconv.resume_facts`); this is the way on from it
(PaddlePaddle's ``--init_model_path`` is the precedent).

The chief alone reads the checkpoint, as a resume does: the transports' start-up (MPI's
broadcast, the parameter server's seed) gives every rank the chief's weights, so every rank
starts identical and the file need only be on the chief's disk. A restarted job never
re-initialises: the run's own checkpoint wins (:class:`InitFromCheckpoints` loads only where
the run starts afresh).

Weights of another dtype are cast, said in a warning: the resume refuses to cast because it
would go on with another computation than the one checkpointed, but a new run reproduces
nothing, and the cast is the very way through that the resume's refusal advises
(:mod:`distconv.cast_advice`). Float to float, and integer to integer where every value
fits: a float on one side only would be truncated, a value the cast makes infinite would end
the first step in a NaN loss, and an integer past a narrower type's range would wrap; each is
refused, as other names or shapes are (another model), naming the first parameter.

Its refusals to start (weights that do not fit, values the cast makes infinite or wraps, frozen
parameters on several ranks, the source inside the ``--out`` that ``--overwrite`` deletes,
nothing at PATH, a damaged checkpoint or one of another format version, a JSON file that is no
manifest, a shard's part) meet every attempt of a job alike: the launcher reads their words
back (``distconv.refused_starts._INIT_FROM``) and restarts none; a change of them here drops
that. A source whose ``checkpoints`` links to a disk not mounted yet (PATH the run, that folder,
or a step folder in it) is named as a resume names it, and restarted: no such refusal.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from distconv.backend import copy_into, is_float_dtype
from distconv.carried_facts import INIT_FROM
from distconv.checkpoint import (
    Checkpoint,
    CheckpointDamaged,
    CheckpointError,
    CheckpointVersionError,
    load_checkpoint,
)
from distconv.checkpoint_checks import native
from distconv.checkpoint_digest import DIGEST_KEY
from distconv.checkpoint_manifest import CHIEF, Manifest
from distconv.checkpoint_reads import read_manifest
from distconv.checkpoints_link import late_disk_problem
from distconv.messages import exception_line, named
from distconv.parameter import Parameter
from distconv.resume import JobStart, OptimState, Position, StepCheckpoints
from distconv.run_dir import RunDirectory, RunDirError
from distconv.run_files import CHECKPOINTS, CHIEF_PART, LEGACY_CHECKPOINT, SHARD_PART
from distconv.sync.base import SyncStrategy

log = logging.getLogger("distconv.resume")


@dataclass(frozen=True)
class InitSource:
    """The checkpoint a run's first weights came from: its file, its step and its digest."""

    path: Path
    step: int
    digest: str

    def record(self) -> dict[str, Any]:
        """What each checkpoint of the new run keeps under :data:`INIT_FROM`."""
        return {"path": str(self.path.absolute()), "step": self.step, "sha256": self.digest}

    def text(self) -> str:
        return f"{self.path} (step {self.step}, sha256 {self.digest[:16]})"


def checkpoint_file(path: str | os.PathLike) -> Path:
    """The checkpoint file ``path`` names: a file itself (a step's ``chief.safetensors``, or
    its manifest ``step-N.json``), a step folder (``checkpoints/step-N``), a run's output
    directory (its newest complete checkpoint, else its one pre-step-checkpoint file), or its
    ``checkpoints`` folder (its newest; moved off the run too).

    Raises:
        CheckpointError: nothing there, a JSON file that is no manifest, a parameter-server
            shard's part, or a folder that holds no complete checkpoint; a RunDirError where a
            run's ``checkpoints`` links to a disk not mounted yet, ``path`` that folder or in
            it (restarted, as a resume is).
    """
    path = Path(path)
    if path.is_file() and path.suffix == ".json":
        return _manifest_of(path).part(CHIEF)
    if path.is_file() and re.fullmatch(SHARD_PART, path.name):
        raise CheckpointError(
            f"--init-from {path}: a parameter-server shard's checkpoint part, which holds that "
            "shard's blocks, not the model's weights; pass its run's --out or one of its "
            "checkpoints/step-N folders, whose chief's part holds every weight"
        )
    if path.is_file():
        return path
    if not path.is_dir():
        _refuse_late_disk(path)
        raise CheckpointError(f"--init-from {path}: no such file or folder")
    if (path / CHIEF_PART).is_file():
        return path / CHIEF_PART
    complete, problems = _run_at(path).scan()  # reads only: no lock, nothing made
    if complete:
        return complete[-1].part(CHIEF)
    if (path / LEGACY_CHECKPOINT).is_file():
        return path / LEGACY_CHECKPOINT
    why = f": {'; '.join(problems)}" if problems else ""
    raise CheckpointError(
        f"--init-from {path}: no complete checkpoint there (a run's --out, one of its "
        f"checkpoints/step-N folders, or a checkpoint file){why}"
    )


def _run_at(path: Path) -> RunDirectory:
    """The run whose ``--out`` is the folder ``path``, or whose ``checkpoints`` folder it is.

    Raises:
        RunDirError: its ``checkpoints`` links to a disk not mounted yet, named as the resume
            names it: not "no complete checkpoint", which the launcher restarts none for.
    """
    checkpoints = path / CHECKPOINTS
    if checkpoints.exists() or checkpoints.is_symlink():  # a link to nothing: a run's
        _check_there(run := RunDirectory(path), path)
        return run
    if path.name == CHECKPOINTS and path.is_symlink():  # RUN/checkpoints, named itself
        _check_there(RunDirectory(path.parent), path)  # an empty mount point: its run tells
    return _CheckpointsFolder(path)


def _check_there(run: RunDirectory, path: Path) -> None:
    """:meth:`~RunDirectory.check_checkpoints_there` of ``run`` (reads only), its refusal
    naming ``--init-from path``."""
    try:
        run.check_checkpoints_there()
    except RunDirError as exc:
        raise RunDirError(f"--init-from {path}: {exc}") from None


def _refuse_late_disk(path: Path) -> None:
    """Raise a RunDirError where ``path``, not there, or a folder above it links to nothing,
    or lies in a run's ``checkpoints`` linked to an empty mount point (a step folder in it,
    on a disk not mounted yet): named as a resume names it, and restarted, not refused for
    good as "no such file or folder"."""
    for link in (path, *path.parents):
        if link.name == CHECKPOINTS and link.is_symlink():  # its run tells an empty mount
            _check_there(RunDirectory(link.parent), path)
        if link.is_symlink() and not link.exists():
            problem = late_disk_problem(link, lambda: False)  # not there, or a loop of links
            raise RunDirError(f"--init-from {path}: {problem}")


class _CheckpointsFolder(RunDirectory):
    """A run's ``checkpoints`` folder named itself (``RUN/checkpoints``, or a disk it links
    to), read as the run's: only :meth:`~RunDirectory.scan` is asked of it."""

    @property
    def checkpoint_root(self) -> Path:
        return self.root


def _manifest_of(path: Path) -> Manifest:
    """The manifest in the file ``path``.

    Raises:
        CheckpointError: the file is no manifest (another JSON file), or a damaged one.
    """
    try:
        return Manifest.parse(read_manifest(path), path)
    except (ValueError, KeyError, TypeError) as exc:  # Manifest.parse's damage
        raise CheckpointDamaged(
            f"--init-from {path}: no checkpoint's manifest, or a damaged one ({named(exc)}); "
            "pass a run's --out, one of its checkpoints/step-N folders, or a checkpoint file"
        ) from None


def first_misfit(params: Sequence[Parameter], theirs: Mapping[str, Any]) -> str | None:
    """The first parameter whose name or shape differs between the model and a checkpoint's
    arrays ``theirs``, in the model's order, then the checkpoint's first extra one, or whose
    dtype is a float on one side only (a cast would truncate); None where all fit (a float
    dtype may differ: :func:`load_weights` casts it)."""
    for p in params:
        if p.name not in theirs:
            return f"{p.name!r}: this model has it, the checkpoint has not"
        if tuple(theirs[p.name].shape) != tuple(p.value.shape):
            ckpt_shape, ours = tuple(theirs[p.name].shape), tuple(p.value.shape)
            return f"{p.name!r}: checkpoint shape {ckpt_shape}, this model {ours}"
        ckpt_dtype, ours = theirs[p.name].dtype, p.value.dtype
        if ckpt_dtype != ours and is_float_dtype(ckpt_dtype) != is_float_dtype(ours):
            return f"{p.name!r}: checkpoint dtype {ckpt_dtype}, this model {ours}"
    extra = sorted(theirs.keys() - {p.name for p in params})
    return f"{extra[0]!r}: the checkpoint has it, this model has not" if extra else None


def load_weights(path: str | os.PathLike, params: Sequence[Parameter]) -> InitSource:
    """Copy the weights of the checkpoint ``path`` names (:func:`checkpoint_file`) into
    ``params``, cast to their dtypes; nothing is written where they do not fit.

    Raises:
        CheckpointError: no checkpoint there, one that cannot be read, is damaged or of
            another format version (a :class:`~distconv.checkpoint.CheckpointDamaged` or
            :class:`~distconv.checkpoint.CheckpointVersionError` naming ``--init-from``), or
            weights of another name or shape (the first named).
    """
    file = checkpoint_file(path)
    try:
        ckpt = load_checkpoint(file, position=False)  # weights only: no step is gone on from
    except CheckpointDamaged as exc:  # not restarted for (refused_starts): the same file
        raise CheckpointDamaged(
            f"--init-from {path}: its checkpoint is damaged ({exc}); pass another: an older "
            "checkpoints/step-N folder, or another file"
        ) from None
    except CheckpointVersionError as exc:  # not "the checkpoint to resume" to the launcher
        raise CheckpointVersionError(
            f"--init-from {path}: its checkpoint has another format version ({exc}); start the "
            "new run with the distconv that wrote it, or from a checkpoint this one wrote"
        ) from None
    digest = _digest_of(file)  # before anything is written: the file may be gone by now
    if (misfit := first_misfit(params, ckpt.params)) is not None:
        raise CheckpointError(
            f"--init-from {file}: its weights do not fit this model (first difference: "
            f"{misfit}); they load only into a model built as the checkpoint's run's"
        )
    _say_cast(ckpt, params)
    with np.errstate(over="ignore"):  # refused below, by its name
        cast = {p.name: ckpt.params[p.name].astype(p.value.dtype, copy=False) for p in params}
    for p in params:
        if (lost := _lost_by_cast(ckpt.params[p.name], cast[p.name])) is not None:
            raise CheckpointError(
                f"--init-from {file}: {p.name!r} holds values past {p.value.dtype}'s range, "
                f"which the cast to this {lost}"
            )
    for p in params:
        copy_into(p.value, cast[p.name])
    return InitSource(file, ckpt.step, digest)


def _lost_by_cast(saved: np.ndarray, cast: np.ndarray) -> str | None:
    """How the cast of ``saved`` to ``cast`` lost a value, with the way out, or None: a finite
    float made infinite, or an integer wrapped (int64 counts past an int32 parameter's range)."""
    if native(saved.dtype) == native(cast.dtype):
        return None
    if is_float_dtype(cast.dtype):
        if np.any(np.isinf(cast) & np.isfinite(saved)):
            return "run's dtype makes infinite; train in a wider dtype"
        return None
    if not np.array_equal(cast, saved):  # by value: numpy compares across integer types
        return f"model's dtype wraps; give it the checkpoint's {saved.dtype}"
    return None


def _say_cast(ckpt: Checkpoint, params: Sequence[Parameter]) -> None:
    """Warn where the checkpoint's weights are of another dtype than this run's."""
    saved = sorted({str(native(a.dtype)) for a in ckpt.params.values()})
    ours = sorted({str(native(p.value.dtype)) for p in params})
    if saved != ours:
        log.warning(
            "--init-from %s: casting its %s weights to this run's %s (--dtype): a new run "
            "reproduces nothing, so they are cast as it starts",
            ckpt.path,
            ",".join(saved),
            ",".join(ours),
        )


def _digest_of(file: Path) -> str:
    """The checkpoint's own SHA-256 (its metadata's), which :func:`load_checkpoint` checked.
    A second read of ``file`` (:class:`~distconv.checkpoint.Checkpoint` keeps no digest), so
    a source run still training may have pruned it since the first: refused in words, and a
    restart takes the run's newest anew.

    Raises:
        CheckpointError: ``file`` cannot be read now (gone since its weights were read).
    """
    from safetensors import safe_open

    try:
        with safe_open(str(file), framework="np") as f:
            return (f.metadata() or {}).get(DIGEST_KEY, "")
    except OSError as exc:  # safetensors' own: no errno, the path in its message
        why = "it is gone" if isinstance(exc, FileNotFoundError) else exception_line(exc)
        raise CheckpointError(
            f"--init-from {file}: cannot be read again after its weights were ({why}: its run "
            "pruned it meanwhile?); nothing was loaded: pass a checkpoint its run keeps, or its "
            "run's --out, which names the newest"
        ) from None


class InitFromCheckpoints(StepCheckpoints):
    """A run's step checkpoints whose fresh start takes the weights of ``source`` (see the
    module docstring), and whose checkpoints record where they came from (:data:`INIT_FROM`);
    every resume carries the record on (:mod:`distconv.carried_facts`). ``source`` None: plain
    step checkpoints. A Trainer makes them (its ``checkpoints``):
    ``partial(InitFromCheckpoints, source=PATH)``.
    """

    def __init__(
        self,
        run: RunDirectory | None,
        params: Sequence[Parameter],
        sync: SyncStrategy,
        facts: Mapping[str, Any],
        start: JobStart | None = None,
        *,
        source: str | os.PathLike | None = None,
    ) -> None:
        super().__init__(run, params, sync, facts, start)
        self.source = None if source is None else os.fspath(source)

    def open(
        self,
        resume: bool | str,
        train_data: Mapping[str, Any] | None = None,
        layers: Mapping[str, Any] | None = None,
    ) -> tuple[OptimState | None, Position]:
        """As :meth:`StepCheckpoints.open`; a fresh start on the chief then loads ``source``."""
        chief = self.sync.is_chief and self.source is not None
        if chief and self.run is not None and resume == "overwrite":
            _refuse_cleared(Path(self.source), self.run)
        try:
            state, pos = super().open(resume, train_data, layers)
        except CheckpointError as exc:
            if not chief or (way_on := self._way_on(str(exc), resume)) is None:
                raise
            raise type(exc)(f"{exc}; {way_on}") from None
        if not chief:
            return state, pos
        if state is None and pos.step == 0:
            self._refuse_frozen()
            loaded = load_weights(self.source, self.params)
            log.info("initialised from %s: weights only, from step 0", loaded.text())
            self.record_fact(INIT_FROM, loaded.record())
        else:
            log.info("--init-from %s not used: resuming this run's own checkpoint", self.source)
        return state, pos

    def _way_on(self, refused: str, resume: bool | str) -> str | None:
        """What the refusal of the run directory (``refused``, its words) says more where it
        meets ``--init-from``; None: nothing."""
        if resume is True and refused.startswith("--resume: no complete"):
            return _RESUME_NEEDS_ONE
        if " already holds a run; " in refused and _inside(Path(self.source), self.run):
            return _HOLDS_THE_SOURCE
        return None

    def _refuse_frozen(self) -> None:
        """Refuse several ranks with frozen parameters: those are no part of the sync, so the
        source's values would reach the chief alone (a resume is refused alike:
        :func:`~distconv.frozen_resume.refuse_frozen_resume`)."""
        frozen = [p.name for p in self.params if p.static]
        if frozen and (world := self.sync.world_size) > 1:
            raise CheckpointError(
                f"--init-from {self.source}: cannot start {world} ranks from it with frozen "
                f"parameters {frozen}: their values would reach rank 0 only; start on one "
                "rank, or load the weights on every rank before fit "
                "(distconv.checkpoint.restore_checkpoint)"
            )


#: what a refused ``--resume --init-from`` adds: a restart needs the run's own checkpoint
_RESUME_NEEDS_ONE = (
    "--resume goes on only from this run's own checkpoint; to start a new run from --init-from, "
    "drop --resume, or pass --resume auto (a restart then resumes the new run)"
)


#: what a refusal of an ``--out`` that holds a run adds where that run holds the source
_HOLDS_THE_SOURCE = (
    "to start a new run from --init-from's weights, which lie in it, pass another --out (the "
    "default --out is named by --data, --optimizer and --seed alone)"
)


def _inside(source: Path, run: RunDirectory) -> bool:
    """Whether ``source`` lies in ``run``'s output directory, or in the folder its
    ``checkpoints`` links to (another disk), which ``--overwrite`` empties too. By realpath,
    which follows a loop of links no further: Path.resolve raised RuntimeError (Python 3.11),
    a traceback where ``--overwrite`` names the loop."""
    where = Path(os.path.realpath(source))
    return any(where.is_relative_to(os.path.realpath(p)) for p in (run.root, run.checkpoint_root))


def _refuse_cleared(source: Path, run: RunDirectory) -> None:
    """Refuse ``--overwrite`` of the output directory that holds ``source``: it would delete
    the weights before (or, on a restart of a run cut short, after) they are read."""
    if _inside(source, run):
        raise CheckpointError(
            f"--init-from {source} lies in --out {run.root}, which --overwrite deletes: start "
            "the new run in another --out"
        )
