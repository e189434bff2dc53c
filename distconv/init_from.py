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

Which file PATH names is :mod:`distconv.checkpoint_paths`'s to say. A script's own
:func:`load_weights` call is worded for a script, naming its call, not a flag
(``load_weights PATH: ...``, :mod:`distconv.source_words`): the launcher reads its refusals
back as it reads ``--init-from``'s, and restarts a launched script on none of them either.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from distconv.backend import copy_into, is_float_dtype
from distconv.carried_facts import INIT_FROM
from distconv.checkpoint import (
    Checkpoint,
    CheckpointDamaged,
    CheckpointError,
    CheckpointReadError,
    CheckpointVersionError,
    load_checkpoint,
)
from distconv.checkpoint_checks import native
from distconv.checkpoint_digest import DIGEST_KEY
from distconv.checkpoint_file_kinds import ShardPartGiven
from distconv.checkpoint_paths import NoCompleteCheckpointError, checkpoint_file, shard_part_refusal
from distconv.messages import exception_line
from distconv.parameter import Parameter
from distconv.resume import JobStart, OptimState, Position, StepCheckpoints
from distconv.run_dir import RunDirectory
from distconv.source_words import INIT_FROM_FLAG, SCRIPT_CALL, SourceWords
from distconv.sync.base import SyncStrategy

log = logging.getLogger("distconv.resume")

_T = TypeVar("_T")


@dataclass(frozen=True)
class InitSource:
    """The checkpoint a run's first weights came from: its file, its step and its content
    digest (:func:`~distconv.checkpoint_digest.digest`: not the file's ``sha256sum``)."""

    path: Path
    step: int
    digest: str

    def record(self) -> dict[str, Any]:
        """What each checkpoint of the new run keeps under :data:`INIT_FROM`; ``sha256``, the
        content digest, keeps the name the records and their readers know it by."""
        return {"path": str(self.path.absolute()), "step": self.step, "sha256": self.digest}

    def text(self) -> str:
        return f"{self.path} (step {self.step}, content digest {self.digest[:16]})"


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


#: how often a folder's newest checkpoint is looked for again where its run pruned it while it
#: was read: a run training with ``--keep-checkpoints 1`` prunes its newest at every save, and
#: one in about 20 loads met that; two tries more make a third prune in a row needed
PRUNED_RETRIES = 2


def load_weights(
    path: str | os.PathLike, params: Sequence[Parameter], *, words: SourceWords = SCRIPT_CALL
) -> InitSource:
    """Copy the weights of the checkpoint ``path`` names (:func:`checkpoint_file`: a run's
    folder names its newest) into ``params``, cast to their dtypes; nothing is written where
    they do not fit. A run still training may prune the checkpoint a folder named while it is
    read: the folder is looked at again (:data:`PRUNED_RETRIES` times) for its newest.

    Args:
        path: a run's folder, its ``checkpoints`` folder, a step's folder or manifest, or a
            checkpoint file.
        params: the model's parameters, whose dtypes the weights are cast to.
        words: how messages name ``path``: a script's call (``load_weights PATH``) by default;
            :data:`~distconv.source_words.INIT_FROM_FLAG` for ``--init-from``.

    Raises:
        CheckpointError: no checkpoint there, one that cannot be read, is damaged or of
            another format version (a :class:`~distconv.checkpoint.CheckpointDamaged` or
            :class:`~distconv.checkpoint.CheckpointVersionError` naming ``path``), or
            weights of another name or shape (the first named).
    """
    return _retried(path, lambda: _load_weights(path, params, words))


def read_checkpoint(path: str | os.PathLike, words: SourceWords = SCRIPT_CALL) -> Checkpoint:
    """The checkpoint ``path`` names, read as :func:`load_weights` reads it (a folder's newest
    looked for again where its run pruned it; no position: no step is gone on from), its
    refusals naming ``path`` in ``words``: for a caller that needs its records first
    (``distconv evaluate`` builds the model they describe, then :func:`copy_weights`).

    Raises:
        CheckpointError: as :func:`load_weights`, bar the weights' fit.
    """
    return _retried(path, lambda: _read(path, checkpoint_file(path, words), words))


def _retried(path: str | os.PathLike, read: Callable[[], _T]) -> _T:
    """``read()``, tried again (:data:`PRUNED_RETRIES` times) where ``path`` is a folder whose
    newest checkpoint its run pruned while it was read."""
    tries = 1 + (PRUNED_RETRIES if Path(path).is_dir() else 0)
    for tried in range(1, tries + 1):
        try:
            return read()
        except (_Pruned, NoCompleteCheckpointError) as exc:
            if tried == tries:  # a plain CheckpointError, as it always was to its readers
                raise CheckpointError(str(exc)) from None
            log.info("%s; looking for its newest again", exc)
    raise AssertionError("unreachable: the last try returns or raises")


class _Pruned(CheckpointError):
    """The checkpoint a path named was gone when it was read (its run pruned it meanwhile)."""


def _load_weights(
    path: str | os.PathLike, params: Sequence[Parameter], words: SourceWords
) -> InitSource:
    """One try of :func:`load_weights`."""
    file = checkpoint_file(path, words)
    ckpt = _read(path, file, words)
    digest = _digest_of(path, file, words)  # before anything is written: it may be gone now
    copy_weights(ckpt, params, words)
    return InitSource(file, ckpt.step, digest)


def copy_weights(ckpt: Checkpoint, params: Sequence[Parameter], words: SourceWords) -> None:
    """Copy the weights of ``ckpt`` (:func:`read_checkpoint`'s) into ``params``, cast to their
    dtypes; nothing is written where they do not fit.

    Raises:
        CheckpointError: weights of another name or shape (the first named), or values the
            cast makes infinite or wraps, naming ``ckpt``'s file in ``words``.
    """
    if (misfit := first_misfit(params, ckpt.params)) is not None:
        raise CheckpointError(
            f"{words.source(ckpt.path)}: its weights do not fit this model (first difference: "
            f"{misfit}); they load only into a model built as the checkpoint's run's"
        )
    _say_cast(ckpt, params, words)
    with np.errstate(over="ignore"):  # refused below, by its name
        cast = {p.name: ckpt.params[p.name].astype(p.value.dtype, copy=False) for p in params}
    for p in params:
        if (lost := _lost_by_cast(ckpt.params[p.name], cast[p.name], words)) is not None:
            raise CheckpointError(
                f"{words.source(ckpt.path)}: {p.name!r} holds values past "
                f"{p.value.dtype}'s range, which the cast to {lost}"
            )
    for p in params:
        copy_into(p.value, cast[p.name])


def _read(path: str | os.PathLike, file: Path, words: SourceWords) -> Checkpoint:
    """One read of ``file``, which ``path`` named, its refusals naming ``path`` in ``words``."""
    source = words.source(path)
    try:
        return load_checkpoint(file, position=False)  # weights only: no step is gone on from
    except CheckpointDamaged as exc:  # not restarted for (refused_starts): the same file
        raise CheckpointDamaged(
            f"{source}: its checkpoint is damaged ({exc}); pass another: an older "
            "checkpoints/step-N folder, or another file"
        ) from None
    except CheckpointVersionError as exc:  # not "the checkpoint to resume" to the launcher
        raise CheckpointVersionError(
            f"{source}: its checkpoint has another format version ({exc}); {words.start} with "
            "the distconv that wrote it, or from a checkpoint this one wrote"
        ) from None
    except ShardPartGiven:  # renamed (its metadata): as one named so is (refused_starts)
        raise shard_part_refusal(path, words) from None
    except CheckpointReadError:
        if file.exists() or not Path(path).is_dir():  # the OS's error, a file or manifest
            raise  # the user named: as is; a folder's newest gone is looked for again
        raise _pruned(path, file, words, "it is gone") from None


def _lost_by_cast(saved: np.ndarray, cast: np.ndarray, words: SourceWords) -> str | None:
    """How the cast of ``saved`` to ``cast`` lost a value, with the way out, or None: a finite
    float made infinite, or an integer wrapped (int64 counts past an int32 parameter's range)."""
    if native(saved.dtype) == native(cast.dtype):
        return None
    if is_float_dtype(cast.dtype):
        if np.any(np.isinf(cast) & np.isfinite(saved)):
            return f"{words.ours} dtype makes infinite; train in a wider dtype"
        return None
    if not np.array_equal(cast, saved):  # by value: numpy compares across integer types
        return f"this model's dtype wraps; give it the checkpoint's {saved.dtype}"
    return None


def _say_cast(ckpt: Checkpoint, params: Sequence[Parameter], words: SourceWords) -> None:
    """Warn where the checkpoint's weights are of another dtype than the model's."""
    saved = sorted({str(native(a.dtype)) for a in ckpt.params.values()})
    ours = sorted({str(native(p.value.dtype)) for p in params})
    if saved != ours:
        log.warning(
            "%s: casting its %s weights to %s %s%s: %s",
            words.source(ckpt.path),
            ",".join(saved),
            words.ours,
            ",".join(ours),
            words.dtype_flag,
            words.cast_why,
        )


def _digest_of(path: str | os.PathLike, file: Path, words: SourceWords) -> str:
    """The checkpoint's content digest (its metadata's SHA-256 of its metadata and tensors,
    not the file's), which :func:`load_checkpoint` checked.
    A second read of ``file`` (:class:`~distconv.checkpoint.Checkpoint` keeps no digest), so
    a source run still training may have pruned it since the first: refused in words, and a
    folder ``path`` is looked at again (:func:`load_weights`); a restart takes its newest anew.

    Raises:
        _Pruned: ``file`` cannot be read now (gone since its weights were read).
    """
    from safetensors import safe_open

    try:
        with safe_open(str(file), framework="np") as f:
            return (f.metadata() or {}).get(DIGEST_KEY, "")
    except OSError as exc:  # safetensors' own: no errno, the path in its message
        why = "it is gone" if isinstance(exc, FileNotFoundError) else exception_line(exc)
        raise _pruned(path, file, words, why) from None


def _pruned(path: str | os.PathLike, file: Path, words: SourceWords, why: str) -> _Pruned:
    """The refusal of ``file``, which ``path`` named and which cannot be read now (``why``):
    a folder's newest named with the folder the user gave, and a way out that is not what they
    did already; a file or a manifest's file as ``--init-from`` always named it."""
    if not Path(path).is_dir():
        return _Pruned(
            f"{words.source(file)}: cannot be read again after its weights were ({why}: its run "
            f"pruned it meanwhile?); nothing was loaded: pass a checkpoint its run keeps, or its "
            f"run's {words.run_folder}, which names the newest"
        )
    return _Pruned(
        f"{words.source(path)}: its newest checkpoint {file} cannot be read ({why}: its run "
        f"pruned it meanwhile, {1 + PRUNED_RETRIES} times in a row?); nothing was loaded: load "
        "again, or once its run has ended (a run that keeps one checkpoint, "
        "--keep-checkpoints 1, prunes its newest at each save)"
    )


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
            loaded = load_weights(self.source, self.params, words=INIT_FROM_FLAG)
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
