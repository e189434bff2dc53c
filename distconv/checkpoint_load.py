"""Reading a checkpoint back: :func:`load_checkpoint` reads and verifies a file that
:func:`~distconv.checkpoint.save_checkpoint` wrote (its format version, its digest, its
metadata), and says why it refuses one, telling a file the OS cannot read now, or this host
lacks what reading it takes, from damage (:class:`~distconv.checkpoint.CheckpointReadError`
and :class:`~distconv.checkpoint.CheckpointDamaged`). :mod:`distconv.checkpoint` re-exports it
and checks that what it read fits a model."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import distconv  # annotations name types through it: get_type_hints imports them then
from distconv.build_identity import build_id
from distconv.checkpoint_digest import DIGEST_KEY, tensors_digest
from distconv.checkpoint_digest import digest as _digest  # a test makes it run out of memory
from distconv.checkpoint_errors import (
    CheckpointDamaged,
    CheckpointReadError,
    CheckpointVersionError,
)
from distconv.checkpoint_file_kinds import refuse_other_kinds, shard_part
from distconv.files import describe_os_error
from distconv.messages import exception_line

if TYPE_CHECKING:
    import distconv.checkpoint


def load_checkpoint(
    path: str | os.PathLike, *, position: bool = True
) -> distconv.checkpoint.Checkpoint:
    """Read and verify a checkpoint.

    Args:
        path: the checkpoint file (a step's ``chief.safetensors``): a folder, a manifest or a
            parameter-server shard's part is refused naming the file to pass
            (:mod:`distconv.checkpoint_file_kinds`).
        position: refuse a step or epoch that is no count, which a run would go on from;
            False reads them as the file holds them, for a caller that takes only the weights,
            and reads a file of format version 1 too (:data:`WEIGHTS_ONLY_VERSION`, distconv
            before 11-30), whose digest covers its tensors alone: its step, epoch, seed and
            extra are as the file holds them, checked by nothing.

    Raises:
        CheckpointReadError: the file is missing or the OS cannot read it (its reason), or
            this host lacks what reading it takes (memory, ``ml_dtypes`` for bfloat16), or it
            is a folder.
        CheckpointDamaged: the file is truncated, corrupt, or not a distconv checkpoint, or
            its metadata is bad (a step or epoch that is no integer; with ``position``, one
            that is no count, as an older distconv could save).
        CheckpointVersionError: the file is a checkpoint of another format version (its
            message names the build that wrote it, where the file records one), or of version
            1 with ``position`` (its message says how to load its weights).
        CheckpointError: the file is a step's manifest or a shard's part, whole and
            distconv's but no checkpoint file: its message names the one to pass.

    Each is a :class:`CheckpointError` with a one-line message that names the file.
    """
    from distconv.checkpoint import (  # which imports this module: the file's format
        BUILD_KEY,
        FORMAT,
        OPTIM_PREFIX,
        VERSION,
        WEIGHTS_ONLY_VERSION,
        Checkpoint,
    )

    path = Path(path)
    refuse_other_kinds(path)  # a folder, a manifest, a shard's part: named for what they are
    tensors, meta = _read(path)
    if meta.get("format") != FORMAT:
        if (refused := shard_part(path, meta)) is not None:  # a shard's part, renamed
            raise refused
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

    from distconv.checkpoint_reads import load_safetensors  # which imports distconv.checkpoint

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
