"""Files and folders a user passes where a checkpoint file belongs, named for what they are.

:func:`~distconv.checkpoint.load_checkpoint` (and so ``restore_checkpoint``) reads one
checkpoint file, ``checkpoints/step-N/chief.safetensors``, exactly as it was written: no
newest is chosen, no dtype cast. A run's folder, a step's folder, its manifest ``step-N.json``
or a parameter-server shard's part are whole and distconv's, and were called "a directory",
"truncated or corrupt" or "not a distconv one". They are refused here naming the file to pass,
or :func:`distconv.init_from.load_weights`, which takes a folder and casts. None is a
:class:`~distconv.checkpoint.CheckpointDamaged`: a resume sets damaged files aside, and these
are not damage (a resume never reads them in its checkpoint's place: see :func:`shard_part`).
"""

from __future__ import annotations

import errno
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from distconv.checkpoint_errors import CheckpointError, CheckpointReadError
from distconv.run_files import CHIEF_PART, SHARD_PART

#: what a parameter-server shard's part is; ``--init-from``'s refusal of one says it too
SHARD_PART_IS = (
    "a parameter-server shard's checkpoint part, which holds that shard's blocks, not the "
    "model's weights"
)
#: what takes a folder, a manifest, or another dtype, in a script
LOAD_WEIGHTS = (
    "distconv.init_from.load_weights(path, params), which takes a run's folder, a step's "
    "folder or manifest, and casts the weights to the model's dtypes"
)


class ShardPartGiven(CheckpointError):
    """A parameter-server shard's part was given where a checkpoint file belongs (by its name,
    or renamed: its metadata). Whole and distconv's, not damage; ``--init-from`` names it in
    its own words (:func:`distconv.checkpoint_paths.shard_part_refusal`)."""


#: the form of a checkpoint file, where none can be named
_FORM = str(Path("RUN", "checkpoints", "step-N", CHIEF_PART))


def refuse_other_kinds(path: Path) -> None:
    """Refuse ``path`` where it is a named pipe, a socket or a device, a folder, a JSON file
    (a step's manifest) or, by its name, a shard's part, naming the checkpoint file to pass
    instead; nothing where it is none.

    Raises:
        CheckpointReadError: a folder (as before: a resume that met one renames nothing), or
            a named pipe, socket or device (opened, a pipe without a writer hung for ever).
        CheckpointError: a JSON file, or a shard's part (a :class:`ShardPartGiven`).
    """
    mode = mode_of(path)  # one stat: what is there, if anything
    if mode is None:
        return
    if (kind := special_kind(mode)) is not None:  # opened, a pipe waited for a writer for ever
        raise CheckpointReadError(
            f"checkpoint {path} is {kind}, not a checkpoint file: a checkpoint is read from "
            f"a regular file; pass the checkpoint file {_FORM}"
        )
    if stat.S_ISDIR(mode):
        raise CheckpointReadError(
            f"checkpoint {path} is a directory, not a file: pass the checkpoint file "
            f"{_file_in(path) or _FORM}, or load its weights with {LOAD_WEIGHTS}"
        )
    if path.suffix == ".json":
        named = _file_in(path)  # None: no manifest (damaged, or another JSON file)
        what = "a step's manifest, which names that step's files" if named else "a JSON file"
        raise CheckpointError(
            f"checkpoint {path} is {what}, not a checkpoint file: pass the checkpoint file "
            f"{named or _FORM}, or load its weights with {LOAD_WEIGHTS}"
        )
    if named_as_shard_part(path):
        raise _shard_part(path)


def mode_of(path: Path) -> int | None:
    """``path``'s ``st_mode`` (links followed), or None where nothing is there: the errors
    that :meth:`Path.is_file` and :meth:`Path.is_dir` read as nothing there (no such file, a
    file on the way, a link to nothing or a loop of links, a name the OS cannot take) read so
    here too, and any other (a folder on the way that may not be searched) is raised, as
    those raise it."""
    try:
        return path.stat().st_mode
    except OSError as exc:
        if exc.errno not in _NOTHING_THERE:
            raise
        return None
    except ValueError:  # a NUL in the name: the OS takes no such name
        return None


#: what a stat raises where nothing is there (pathlib's ignored errors)
_NOTHING_THERE = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)
#: what a path that is neither a file nor a folder is, by its mode's type
_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def special_kind(mode: int) -> str | None:
    """What a path of ``mode`` is where it is neither a file nor a folder (a named pipe, a
    socket, a device); None for a file or a folder."""
    return next((kind for is_kind, kind in _SPECIAL_KINDS if is_kind(mode)), None)


def named_as_shard_part(path: Path) -> bool:
    """Whether ``path``'s name is a parameter-server shard's part's
    (``pserver-shard<K>-step<N>.safetensors``): the name check of both refusals of one given
    where a checkpoint belongs, this module's and ``--init-from``'s
    (:func:`distconv.checkpoint_paths.shard_part_refusal`). It reads the name only: each caller
    knows already, or asks, whether a file is there."""
    return re.fullmatch(SHARD_PART, path.name) is not None


def shard_part(path: Path, meta: Mapping[str, str]) -> ShardPartGiven | None:
    """The refusal of a file whose metadata is a shard's part's (its ``shard`` and ``table``)
    under another name; None for any other file. A step's own ``chief.safetensors`` holding
    that is a damaged step, which a resume sets aside as before: None for it."""
    if path.name == CHIEF_PART or not {"shard", "table"} <= meta.keys():
        return None
    return _shard_part(path)


def _shard_part(path: Path) -> ShardPartGiven:
    return ShardPartGiven(
        f"checkpoint {path} is {SHARD_PART_IS}: pass the chief's part of one of its run's "
        f"checkpoints, {_FORM}, which holds every weight, "
        f"or load its run's weights with {LOAD_WEIGHTS}"
    )


def _file_in(path: Path) -> Path | None:
    """The checkpoint file that ``--init-from path`` would load (a folder's newest, a
    manifest's chief part), or None where ``path`` names none now."""
    from distconv.checkpoint_paths import checkpoint_file  # which imports distconv.checkpoint

    try:
        return checkpoint_file(path)
    except CheckpointError:  # no complete checkpoint in it, no manifest
        return None
