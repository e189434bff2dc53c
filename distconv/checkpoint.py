"""Atomic save and validated restore of parameters and optimizer state, in safetensors.

One file holds everything a run needs to continue: each parameter under its own name, each
optimizer buffer as ``optim/<parameter name>/<state key>``, and the step, epoch, seed and
optimizer config as string metadata. safetensors holds raw tensors and a JSON header, nothing
pickled, so a checkpoint is safe to open and PyTorch users can read it
(``safetensors.torch.load_file``).

A save never leaves a half-written checkpoint behind: it writes a temporary file in the same
directory, flushes it to disk, renames it over the old one (atomic on POSIX) and syncs the
directory. A SHA-256 over the tensors, kept in the metadata, catches a file damaged later.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from distconv.backend import is_gpu_array, to_device, to_host
from distconv.parameter import Parameter

FORMAT = "distconv-checkpoint"
VERSION = "1"
OPTIM_PREFIX = "optim/"

OptimState = Mapping[str, Mapping[str, Any]]


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, or does not fit the model; the message names it."""


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
    """

    path: Path
    params: dict[str, np.ndarray]
    optim_state: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    step: int = 0
    epoch: int = 0
    seed: int | None = None
    optimizer: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


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
        optimizer: the optimizer's config.
        extra: other JSON-able facts to keep.

    Raises:
        CheckpointError: a parameter name clashes with the optimizer-state prefix or another name.
        OSError: the file cannot be written (the old checkpoint is left as it was).

    Only one process may write a given path; it removes temporary files a killed save left.
    """
    tensors = _tensors(params, optim_state or {})
    metadata = {
        "format": FORMAT,
        "version": VERSION,
        "step": str(int(step)),
        "epoch": str(int(epoch)),
        "seed": "" if seed is None else str(int(seed)),
        "optimizer": json.dumps(dict(optimizer)) if optimizer is not None else "",
        "extra": json.dumps(dict(extra or {})),
        "sha256": _digest(tensors),
    }
    _write_atomically(Path(path), tensors, metadata)


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
    """A C-contiguous host copy or view; 0-d stays 0-d (``ascontiguousarray`` would not)."""
    return np.asarray(to_host(a), order="C")


def _digest(tensors: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        a = tensors[name]
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _write_atomically(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]):
    from safetensors.numpy import save_file

    prefix = f".{path.name}."
    # a writer killed mid-save leaves its temporary file behind; one writer per path, so any
    # such file is stale by now and would only fill the disk
    for stale in path.parent.glob(f"{glob.escape(prefix)}*.tmp"):
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would make the checkpoint private to its writer
        with open(tmp, "rb+") as f:  # the data must be on disk before the rename makes it live
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read and verify a checkpoint.

    Raises:
        CheckpointError: the file is missing, truncated, corrupt, or not a distconv checkpoint;
            the message names the file.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    tensors, meta = _read(path)
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path} is a safetensors file but not a distconv one")
    if _digest(tensors) != meta.get("sha256"):
        raise CheckpointError(f"checkpoint {path} is corrupt: its tensors fail the checksum")
    try:
        ckpt = Checkpoint(
            path=path,
            params={},
            step=int(meta["step"]),
            epoch=int(meta["epoch"]),
            seed=int(meta["seed"]) if meta["seed"] else None,
            optimizer=json.loads(meta["optimizer"]) if meta["optimizer"] else None,
            extra=json.loads(meta["extra"]),
        )
    except (KeyError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path} has bad metadata: {exc!r}") from None
    for name, a in tensors.items():
        if name.startswith(OPTIM_PREFIX):
            pname, _, key = name[len(OPTIM_PREFIX) :].rpartition("/")
            ckpt.optim_state.setdefault(pname, {})[key] = a
        else:
            ckpt.params[name] = a
    return ckpt


def _read(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    from safetensors import safe_open

    try:
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
            tensors = {k: np.array(f.get_tensor(k)) for k in f.keys()}
    except Exception as exc:  # safetensors raises several types for a damaged file
        raise CheckpointError(
            f"checkpoint {path} is unreadable (truncated or corrupt): {exc}"
        ) from None
    return tensors, meta


def restore_checkpoint(
    source: str | os.PathLike | Checkpoint,
    params: Sequence[Parameter],
    optim_state: Mapping[str, dict[str, Any]] | None = None,
) -> Checkpoint:
    """Copy a checkpoint's arrays into ``params`` and ``optim_state``, in place, after checking.

    Everything is checked before anything is written, so a checkpoint that does not fit leaves
    the model untouched. Arrays go to the device of the array they replace.

    Args:
        source: a checkpoint file or an already loaded :class:`Checkpoint`.
        params: the model's parameters.
        optim_state: the optimizer state to fill, already initialised for every parameter
            (``LocalSync.state`` after ``setup``); its keys and shapes are the reference.

    Returns:
        The checkpoint, for its step, epoch, seed and optimizer config.

    Raises:
        CheckpointError: unreadable file, or names, shapes or state keys that differ from the
            model's; the message lists every mismatch.
    """
    ckpt = source if isinstance(source, Checkpoint) else load_checkpoint(source)
    ours = {p.name: p.value for p in params}
    problems = _mismatches("parameter", ours, ckpt.params)
    if optim_state is not None:
        ours_state = _flatten(optim_state)
        problems += _mismatches("optimizer state", ours_state, _flatten(ckpt.optim_state))
    if problems:
        listed = "; ".join(problems)
        raise CheckpointError(f"checkpoint {ckpt.path} does not fit the model: {listed}")
    for p in params:
        _copy_into(p.value, ckpt.params[p.name])
    if optim_state is not None:
        for name, state in optim_state.items():
            for key, value in state.items():
                _copy_into(value, ckpt.optim_state[name][key])
    return ckpt


def _flatten(state: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {f"{name}/{key}": v for name, s in state.items() for key, v in s.items()}


def _mismatches(kind: str, ours: Mapping[str, Any], theirs: Mapping[str, np.ndarray]) -> list[str]:
    missing = sorted(set(ours) - set(theirs))
    unexpected = sorted(set(theirs) - set(ours))
    problems = [f"{kind} {n!r} is missing from the checkpoint" for n in missing]
    problems += [f"{kind} {n!r} is in the checkpoint but not in the model" for n in unexpected]
    for name in sorted(set(ours) & set(theirs)):
        want, got = tuple(ours[name].shape), tuple(theirs[name].shape)
        if want != got:
            problems.append(f"{kind} {name!r}: model shape {want}, checkpoint shape {got}")
    return problems


def _copy_into(target: Any, host: np.ndarray) -> None:
    """``target[...] = host`` on ``target``'s device and in its dtype."""
    device = "gpu" if is_gpu_array(target) else "cpu"
    target[...] = to_device(host.astype(target.dtype, copy=False), device)
