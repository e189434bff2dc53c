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

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from distconv.backend import copy_into, to_host
from distconv.build_identity import build_id
from distconv.cast_advice import dtype_only_advice
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

# the errors and load_checkpoint: imported from here ("X as X" tells a type checker so)
from distconv.checkpoint_errors import CheckpointDamaged as CheckpointDamaged
from distconv.checkpoint_errors import CheckpointError as CheckpointError
from distconv.checkpoint_errors import CheckpointReadError as CheckpointReadError
from distconv.checkpoint_errors import CheckpointVersionError as CheckpointVersionError
from distconv.checkpoint_load import load_checkpoint as load_checkpoint  # the read side
from distconv.checkpoint_manifest import sorted_header
from distconv.files import describe_os_error, write_atomically
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
        TypeError: ``params`` is no sequence of them (the network, a dict) or an item of it
            has no ``name`` and ``value``, as a :class:`Parameter` has (an array): pass
            ``net.parameters()``; nothing is written.

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


def _parameters(params: Sequence[Parameter]) -> list[Parameter]:
    """``params`` as a list, refused (TypeError) where it is no sequence of Parameters. Read by
    name and value alone (a tool rewriting a checkpoint passes its own). The network itself
    failed as "KeyError: 0" (its ``__getitem__`` takes names), a dict as "got str" (its keys),
    ``net.parameters`` uncalled as "'method' object is not iterable", an array in the list as
    "'numpy.ndarray' object has no attribute 'name'"; one Parameter was "got Parameter"."""
    if not isinstance(params, Iterable) or isinstance(params, (Mapping, str)):
        raise TypeError(
            "params must be a sequence of Parameters (net.parameters()), got "
            f"{type(params).__name__}"
        )
    given = list(params)
    for p in given:
        if not (isinstance(getattr(p, "name", None), str) and hasattr(p, "value")):
            raise TypeError(f"params must be Parameters (net.parameters()), got {type(p).__name__}")
    return given


def _tensors(params: Sequence[Parameter], optim_state: OptimState) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    for p in _parameters(params):
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

    This is the resume's read, exact: one file as it was written, no dtype cast. A run's
    folder, a step's folder or manifest, or a parameter-server shard's part is refused naming
    the checkpoint file to pass, or :func:`distconv.init_from.load_weights`, which takes them
    (a folder: its newest checkpoint) and casts the weights to the model's dtypes.

    Args:
        source: a checkpoint file (``checkpoints/step-N/chief.safetensors``) or an already
            loaded :class:`Checkpoint`.
        params: the model's parameters.
        optim_state: the optimizer state to fill, already initialised for every parameter
            (``LocalSync.state`` after ``setup``); its keys and shapes are the reference.

    Returns:
        The checkpoint, for its step, epoch, seed and optimizer config.

    Raises:
        CheckpointError: no checkpoint file (a folder, a manifest, a shard's part: none a
            :class:`CheckpointDamaged`), an unreadable file, or names, shapes, dtypes or state
            keys that differ from the model's; the message lists every mismatch.
        TypeError: ``params`` is no sequence of :class:`Parameter` (the network, a dict):
            pass ``net.parameters()``; nothing is read or written.
    """
    params = _parameters(params)  # before the file is read: the network, a dict, ...
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
    if problems:  # and where the parameters differ in dtype alone, the cast that loads them
        cast = dtype_only_advice(params, ckpt.params)  # a sentence of its own, after the list
        listed = "; ".join(problems) + (f".{cast}" if cast else "")
        raise CheckpointError(f"checkpoint {ckpt.path} does not fit the model: {listed}")
