"""Atomic save and validated restore of parameters and optimizer state, in safetensors.

One file holds everything a run needs to continue: each parameter under its own name, each
optimizer buffer as ``optim/<parameter name>/<state key>``, and the step, epoch, seed and
optimizer config as string metadata. safetensors holds raw tensors and a JSON header, nothing
pickled, so a checkpoint is safe to open and PyTorch users can read it
(``safetensors.torch.load_file``).

A save never leaves a half-written checkpoint behind: it writes a temporary file in the same
directory, flushes it to disk, renames it over the old one (atomic on POSIX) and syncs the
directory (:mod:`distconv.files`). A SHA-256 over the metadata and the tensors, kept in the
metadata, catches a file damaged later: a changed epoch fails the check like a changed weight.
The same content is the same bytes (its metadata sorted), so checkpoints can be hashed.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from distconv.backend import copy_into, to_host
from distconv.build_identity import build_id
from distconv.checkpoint_checks import (
    OptimState,
    extra_text,
    flatten,
    malformed,
    mismatches,
    native,
    optimizer_words,
    read_otherwise,
    save_problems,
)
from distconv.checkpoint_digest import DIGEST_KEY as DIGEST_KEY  # tests read it here
from distconv.checkpoint_digest import digest as _digest  # a test makes it run out of memory
from distconv.checkpoint_digest import tensors_digest
from distconv.checkpoint_errors import (  # raised here, and imported from here by callers
    CheckpointDamaged,
    CheckpointError,
    CheckpointReadError,
    CheckpointVersionError,
)
from distconv.checkpoint_manifest import sorted_header
from distconv.files import describe_os_error, write_atomically
from distconv.messages import exception_line
from distconv.parameter import Parameter
from distconv.sync.local_state import state_problems

FORMAT = "distconv-checkpoint"
VERSION = "2"  # 2: the digest covers the metadata as well as the tensors
#: the version read for a file's weights alone (``position=False``): its digest covers only them
WEIGHTS_ONLY_VERSION = "1"
#: the metadata key of the distconv that wrote the file (:func:`~distconv.build_identity.build_id`)
BUILD_KEY = "build"
OPTIM_PREFIX = "optim/"
CHUNK = 8 << 20  # bytes per write, so a hook can stop a writer in the middle of a save


@dataclass
class Checkpoint:
    """What a checkpoint file holds, on the host.

    Attributes:
        path: the file it was read from.
        params: parameter arrays by name.
        optim_state: optimizer state by parameter name, then state key.
        step: optimizer steps taken.
        epoch: epochs completed.
        seed: the run's seed, if one was saved.
        optimizer: the optimizer's config (:meth:`distconv.optim.Optimizer.config`), if saved.
        extra: any other JSON-able facts the writer saved (batch size, data set, ...).
        build: the distconv that wrote it (``0.1.0+3f2a9c0d41b7e655``), None where the file
            records none (a distconv before 12-07).
    """

    path: Path
    params: dict[str, np.ndarray]
    optim_state: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    step: int = 0
    epoch: int = 0
    seed: int | None = None
    optimizer: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    build: str | None = None


def save_checkpoint(
    path: str | os.PathLike,
    params: Sequence[Parameter],
    optim_state: OptimState | None = None,
    *,
    step: int = 0,
    epoch: int = 0,
    seed: int | None = None,
    optimizer: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Write a checkpoint atomically: ``path`` holds either the old file or the new, whole.

    Args:
        path: the checkpoint file; its directory must exist.
        params: the parameters to save, by their names.
        optim_state: optimizer state by parameter name then state key, e.g. ``LocalSync.state``.
        step: optimizer steps taken.
        epoch: epochs completed.
        seed: the run's seed.
        optimizer: the optimizer's config, as JSON as ``extra`` is (a custom one may hold a set).
        extra: other facts to keep, as JSON (a set as a sorted list: :func:`extra_text`).

    Raises:
        CheckpointError: a parameter name clashes with the optimizer-state prefix or another
            name, the optimizer state or an entry of it is no mapping, ``step``, ``epoch`` or a
            count of the state (Adam's ``step``) is no count (a whole number from 0 to int64's
            largest, which a restore would refuse), ``seed`` is no integer (a whole number:
            2.5 was kept as 2, True as 1), or the file cannot be written (the
            message names the file and the cause, such as "no space left on device"); the
            old checkpoint is left as it was.

    Only one process may write a given path; it removes temporary files a killed save left.
    """
    check_savable(path, optim_state, step=step, epoch=epoch, seed=seed)
    tensors = _tensors(params, optim_state or {})
    metadata = {
        "format": FORMAT,
        "version": VERSION,
        "step": str(int(step)),
        "epoch": str(int(epoch)),
        "seed": "" if seed is None else str(int(seed)),
        "optimizer": extra_text(optimizer) if optimizer is not None else "",  # as extra, below
        "extra": extra_text(extra or {}),
        BUILD_KEY: build_id(),  # which code wrote it: the first thing to ask of a refusal
    }
    save_tensors(path, tensors, metadata)


def check_savable(
    where: str | os.PathLike,
    optim_state: OptimState | None = None,
    *,
    step: Any,
    epoch: Any,
    seed: Any = None,
) -> None:
    """Refuse what :func:`save_checkpoint` would refuse of ``optim_state``, ``step``,
    ``epoch`` and ``seed`` (see there), without writing anything: for a caller that checks a
    checkpoint before it writes any of its files, so that a refusal leaves none of them.

    Args:
        where: the checkpoint as the message names it (its path).

    Raises:
        CheckpointError: ``cannot save checkpoint <where>: <each problem>``.
    """
    state = {} if optim_state is None else optim_state
    if problems := save_problems(state, {"step": step, "epoch": epoch}, seed):
        raise CheckpointError(f"cannot save checkpoint {where}: {'; '.join(problems)}")


def save_tensors(
    path: str | os.PathLike, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str]
) -> None:
    """Write tensors and string metadata as a safetensors file, atomically, with a digest
    that covers both (what :func:`save_checkpoint` and a parameter-server shard's part use).

    Raises:
        CheckpointError: the file cannot be written; the old one is left as it was.
    """
    from safetensors.numpy import save

    path = Path(path)
    metadata = {**metadata, DIGEST_KEY: _digest(tensors, metadata)}
    chunks = sorted_header(save(dict(tensors), metadata=metadata), CHUNK)
    try:
        write_atomically(path, chunks)
    except OSError as exc:
        raise CheckpointError(
            f"cannot save checkpoint {path}: {describe_os_error(exc)}; any checkpoint before it "
            "is intact"
        ) from None


def _tensors(params: Sequence[Parameter], optim_state: OptimState) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    for p in params:
        if p.name.startswith(OPTIM_PREFIX) or p.name in tensors:
            raise CheckpointError(f"cannot save parameter {p.name!r}: the name is taken")
        tensors[p.name] = _host(p.value)
    for name, state in optim_state.items():
        for key, value in state.items():
            tensors[f"{OPTIM_PREFIX}{name}/{key}"] = _host(value)
    return tensors


def _host(a: Any) -> np.ndarray:
    """A C-contiguous host array in native byte order, the bytes safetensors writes and the
    digest covers; 0-d stays 0-d (``ascontiguousarray`` would not)."""
    return (host := np.asarray(to_host(a), order="C")).astype(native(host.dtype), copy=False)


def load_checkpoint(path: str | os.PathLike, *, position: bool = True) -> Checkpoint:
    """Read and verify a checkpoint.

    Args:
        path: the checkpoint file.
        position: refuse a step or epoch that is no count, which a run would go on from;
            False reads them as the file holds them, for a caller that takes only the weights,
            and reads a file of format version 1 too (:data:`WEIGHTS_ONLY_VERSION`, distconv
            before 11-30), whose digest covers its tensors alone: its step, epoch, seed and
            extra are as the file holds them, checked by nothing.

    Raises:
        CheckpointReadError: the file is missing or the OS cannot read it (its reason), or
            this host lacks what reading it takes (memory, ``ml_dtypes`` for bfloat16).
        CheckpointDamaged: the file is truncated, corrupt, or not a distconv checkpoint, or
            its metadata is bad (a step or epoch that is no integer; with ``position``, one
            that is no count, as an older distconv could save).
        CheckpointVersionError: the file is a checkpoint of another format version (its
            message names the build that wrote it, where the file records one), or of version
            1 with ``position`` (its message says how to load its weights).

    Each is a :class:`CheckpointError` with a one-line message that names the file.
    """
    path = Path(path)
    tensors, meta = _read(path)
    if meta.get("format") != FORMAT:
        raise CheckpointDamaged(f"checkpoint {path} is a safetensors file but not a distconv one")
    weights_only = meta.get("version") == WEIGHTS_ONLY_VERSION
    if meta.get("version") != VERSION and not (weights_only and not position):
        # not damage: a resume would set it aside for an older checkpoint, and the distconv
        # that wrote it (a job's other image) would then resume from that one
        raise CheckpointVersionError(
            f"checkpoint {path} has format version {meta.get('version')!r}; this distconv "
            f"reads version {VERSION!r}: "
            + (_WEIGHTS_ONLY if weights_only else _resume_with(meta.get(BUILD_KEY)))
        )
    try:  # a copy of each tensor in turn
        digest = tensors_digest(tensors) if weights_only else _digest(tensors, meta)
    except MemoryError as exc:
        raise _lacking(path, exc) from None
    if digest != meta.get(DIGEST_KEY):
        raise CheckpointDamaged(f"checkpoint {path} is corrupt: it fails its checksum")
    try:
        ckpt = Checkpoint(
            path=path,
            params={},
            step=_count(meta, "step", position),
            epoch=_count(meta, "epoch", position),
            seed=int(meta["seed"]) if meta["seed"] else None,
            optimizer=json.loads(meta["optimizer"]) if meta["optimizer"] else None,
            extra=json.loads(meta["extra"]),
            build=meta.get(BUILD_KEY) or None,
        )
    except (KeyError, ValueError) as exc:
        raise CheckpointDamaged(f"checkpoint {path} has bad metadata: {exc!r}") from None
    for name, a in tensors.items():
        if name.startswith(OPTIM_PREFIX):
            pname, _, key = name[len(OPTIM_PREFIX) :].rpartition("/")
            ckpt.optim_state.setdefault(pname, {})[key] = a
        else:
            ckpt.params[name] = a
    return ckpt


#: how a file of :data:`WEIGHTS_ONLY_VERSION` is read: its digest covers no step or state
_WEIGHTS_ONLY = (
    "no run resumes from a version '1' file, whose checksum covers its tensors alone; its "
    "weights load into a model with distconv.checkpoint.restore_checkpoint(path, params)"
)


def _resume_with(build: str | None) -> str:
    """What to resume a file of another format version with: the build that wrote it, named
    where the file records it (a distconv before 12-07 does not)."""
    if not build:
        return "resume with the distconv that wrote it"
    return f"written by distconv {build}; this is {build_id()}: resume with that build"


def _count(meta: Mapping[str, str], key: str, checked: bool) -> int:
    """Metadata ``key`` (``step``, ``epoch``) as a count where ``checked``: a distconv before
    save_checkpoint checked them saved ``int()`` of -1 as "-1" and of 2**63 past int64.

    Raises:
        KeyError: it is missing. ValueError: it is no integer, or (``checked``) no count (a
            whole number from 0 to int64's largest).
    """
    value = int(meta[key])
    if checked and not 0 <= value <= np.iinfo(np.int64).max:
        raise ValueError(f"{key} {meta[key]!r} is not a count (a whole number from 0 to 2**63 - 1)")
    return value


def _read(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The tensors and metadata of a safetensors file, or a one-line CheckpointError."""
    from safetensors.numpy import load

    from distconv.checkpoint_reads import load_safetensors  # which imports this module

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointReadError(f"checkpoint {path} does not exist") from None
    except IsADirectoryError:
        raise CheckpointReadError(f"checkpoint {path} is a directory, not a file") from None
    except OSError as exc:  # EIO, EACCES, a network file system's hiccup: may pass
        raise CheckpointReadError(
            f"checkpoint {path} cannot be read: {describe_os_error(exc)}; the file is left as "
            "it is, retry once it can be read"
        ) from None
    except MemoryError as exc:  # the whole file in memory: the largest allocation of a read
        raise _lacking(path, exc) from None
    try:
        tensors, meta = load_safetensors(raw, load)
    except (ImportError, MemoryError) as exc:  # this host's lack: the file is not set aside
        raise _lacking(path, exc) from None
    except Exception as exc:  # safetensors raises several types for a damaged file
        reason = exception_line(exc)
        raise CheckpointDamaged(
            f"checkpoint {path} is unreadable (truncated or corrupt): {reason}"
        ) from None
    return tensors, meta


def _lacking(path: Path, exc: BaseException) -> CheckpointReadError:
    """The read error of a checkpoint this host lacks what it takes to read (memory,
    ``ml_dtypes``): not damage, so a resume sets nothing aside."""
    return CheckpointReadError(
        f"checkpoint {path} cannot be read here: {exception_line(exc)}; the file is left as it is"
    )


def restore_checkpoint(
    source: str | os.PathLike | Checkpoint,
    params: Sequence[Parameter],
    optim_state: Mapping[str, dict[str, Any]] | None = None,
) -> Checkpoint:
    """Copy a checkpoint's arrays into ``params`` and ``optim_state``, in place, after checking.

    Everything is checked before anything is written, so a checkpoint that does not fit leaves
    the model untouched. Arrays go to the device of the array they replace. A file's step and
    epoch are checked only with ``optim_state`` (training goes on from them): its weights alone
    (fine-tuning) load from a file whose step is no count, as an older distconv saved -1.

    Args:
        source: a checkpoint file or an already loaded :class:`Checkpoint`.
        params: the model's parameters.
        optim_state: the optimizer state to fill, already initialised for every parameter
            (``LocalSync.state`` after ``setup``); its keys and shapes are the reference.

    Returns:
        The checkpoint, for its step, epoch, seed and optimizer config.

    Raises:
        CheckpointError: unreadable file, or names, shapes, dtypes or state keys that differ
            from the model's; the message lists every mismatch.
    """
    position = optim_state is not None  # the state's training goes on from its step
    ckpt = source if isinstance(source, Checkpoint) else load_checkpoint(source, position=position)
    check_fit(ckpt, params, optim_state)
    for p in params:
        copy_into(p.value, ckpt.params[p.name])
    if optim_state is not None:
        for name, state in optim_state.items():
            for key, value in state.items():
                copy_into(value, ckpt.optim_state[name][key])
    return ckpt


def check_fit(
    ckpt: Checkpoint,
    params: Sequence[Parameter],
    optim_state: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """Check that ``ckpt`` fits the model: the same names, shapes and dtypes, and no two
    parameters of one name (both would get its array; one listed twice is one, as in setup).

    Raises:
        CheckpointError: one line listing every mismatch, and each count (``step``) below 0.
    """
    named = Counter(p.name for p in {id(p): p for p in params}.values())
    problems = [f"{n} parameters are named {k!r}" for k, n in named.items() if n > 1]
    problems += mismatches("parameter", {p.name: p.value for p in params}, ckpt.params)
    if optim_state is not None:  # by name, shape and dtype once every entry is a mapping
        problems += (
            malformed(optim_state, ckpt.optim_state)
            or mismatches("optimizer state", flatten(optim_state), flatten(ckpt.optim_state))
            or read_otherwise(optim_state, ckpt.optim_state)
            or [optimizer_words(said) for said in state_problems(optim_state, ckpt.optim_state)]
        )
    if problems:
        listed = "; ".join(problems)
        raise CheckpointError(f"checkpoint {ckpt.path} does not fit the model: {listed}")
