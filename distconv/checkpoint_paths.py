"""Which checkpoint file a path names: what ``--init-from PATH`` and
:func:`distconv.init_from.load_weights` take (a run's folder and its newest checkpoint, a step's
folder, a manifest, a checkpoint file), and their refusals of what names none. It only reads:
no lock is taken, nothing is made. Its messages are worded for the caller
(:mod:`distconv.source_words`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from distconv.checkpoint import CheckpointDamaged, CheckpointError
from distconv.checkpoint_file_kinds import (
    SHARD_PART_IS,
    mode_of,
    named_as_shard_part,
    special_kind,
)
from distconv.checkpoint_manifest import CHIEF, Manifest
from distconv.checkpoint_reads import read_manifest
from distconv.checkpoints_link import late_disk_problem
from distconv.messages import named
from distconv.run_dir import RunDirectory, RunDirError
from distconv.run_files import CHECKPOINTS, CHIEF_PART, LEGACY_CHECKPOINT
from distconv.source_words import INIT_FROM_FLAG, SourceWords


class NoCompleteCheckpointError(CheckpointError):
    """A folder holds no complete checkpoint now. A run still training completes and prunes
    its checkpoints meanwhile (a scan can list a manifest whose parts are pruned before they
    are looked at), so a loader may look again (:func:`distconv.init_from.load_weights`)."""


def checkpoint_file(path: str | os.PathLike, words: SourceWords = INIT_FROM_FLAG) -> Path:
    """The checkpoint file ``path`` names: a file itself (a step's ``chief.safetensors``, or
    its manifest ``step-N.json``), a step folder (``checkpoints/step-N``), a run's output
    directory (its newest complete checkpoint, else its one pre-step-checkpoint file), or its
    ``checkpoints`` folder (its newest; moved off the run too).

    Args:
        words: how the messages name ``path`` (``--init-from``'s words by default).

    Raises:
        CheckpointError: nothing there, a named pipe, a socket or a device, a JSON file that
            is no manifest, a parameter-server shard's part, or (a
            :class:`NoCompleteCheckpointError`) a folder that holds no complete checkpoint; a
            RunDirError where a run's ``checkpoints`` links to a disk not mounted yet, ``path``
            that folder or in it (restarted, as a resume is).
    """
    path = Path(path)
    mode = mode_of(path)  # one stat: whether a file, a folder or nothing is there
    if mode is not None and stat.S_ISREG(mode):
        return _file_named(path, words)
    if mode is not None and (kind := special_kind(mode)) is not None:
        raise CheckpointError(  # not "no such file": ls shows it; the launcher reads the words
            f"{words.source(path)}: no complete checkpoint there (it is {kind}, not a file or "
            f"a folder): pass a run's {words.run_folder}, one of its checkpoints/step-N "
            "folders, or a checkpoint file"
        )
    if mode is None or not stat.S_ISDIR(mode):
        _refuse_late_disk(path, words)
        raise CheckpointError(f"{words.source(path)}: no such file or folder")
    if (path / CHIEF_PART).is_file():
        return path / CHIEF_PART
    complete, problems = _run_at(path, words).scan()  # reads only: no lock, nothing made
    if complete:
        return complete[-1].part(CHIEF)
    if (path / LEGACY_CHECKPOINT).is_file():
        return path / LEGACY_CHECKPOINT
    why = f": {'; '.join(problems)}" if problems else ""
    raise NoCompleteCheckpointError(
        f"{words.source(path)}: no complete checkpoint there (a run's {words.run_folder}, one "
        f"of its checkpoints/step-N folders, or a checkpoint file){why}"
    )


def _file_named(path: Path, words: SourceWords) -> Path:
    """The checkpoint file that the file ``path`` is, or that it names (a step's manifest);
    a shard's part, by its name, refused in ``words``."""
    if path.suffix == ".json":
        return _manifest_of(path, words).part(CHIEF)
    if named_as_shard_part(path):
        raise shard_part_refusal(path, words)
    return path


def shard_part_refusal(path: str | os.PathLike, words: SourceWords) -> CheckpointError:
    """The refusal of ``path``, a parameter-server shard's part (by its name, or renamed),
    in ``words``, which the launcher reads back (``refused_starts``)."""
    return CheckpointError(
        f"{words.source(path)}: {SHARD_PART_IS}; pass its run's {words.run_folder} or one "
        "of its checkpoints/step-N folders, whose chief's part holds every weight"
    )


def _run_at(path: Path, words: SourceWords) -> RunDirectory:
    """The run whose ``--out`` is the folder ``path``, or whose ``checkpoints`` folder it is.

    Raises:
        RunDirError: its ``checkpoints`` links to a disk not mounted yet, named as the resume
            names it: not "no complete checkpoint", which the launcher restarts none for.
    """
    checkpoints = path / CHECKPOINTS
    if checkpoints.exists() or checkpoints.is_symlink():  # a link to nothing: a run's
        _check_there(run := RunDirectory(path), path, words)
        return run
    if path.name == CHECKPOINTS and path.is_symlink():  # RUN/checkpoints, named itself
        _check_there(RunDirectory(path.parent), path, words)  # an empty mount point: its run
    return _CheckpointsFolder(path)


def _check_there(run: RunDirectory, path: Path, words: SourceWords) -> None:
    """:meth:`~RunDirectory.check_checkpoints_there` of ``run`` (reads only), its refusal
    naming ``path`` in ``words``."""
    try:
        run.check_checkpoints_there()
    except RunDirError as exc:
        raise RunDirError(f"{words.source(path)}: {exc}") from None


def _refuse_late_disk(path: Path, words: SourceWords) -> None:
    """Raise a RunDirError where ``path``, not there, or a folder above it links to nothing,
    or lies in a run's ``checkpoints`` linked to an empty mount point (a step folder in it,
    on a disk not mounted yet): named as a resume names it, and restarted, not refused for
    good as "no such file or folder"."""
    for link in (path, *path.parents):
        if link.name == CHECKPOINTS and link.is_symlink():  # its run tells an empty mount
            _check_there(RunDirectory(link.parent), path, words)
        if link.is_symlink() and not link.exists():
            problem = late_disk_problem(link, lambda: False)  # not there, or a loop of links
            raise RunDirError(f"{words.source(path)}: {problem}")


class _CheckpointsFolder(RunDirectory):
    """A run's ``checkpoints`` folder named itself (``RUN/checkpoints``, or a disk it links
    to), read as the run's: only :meth:`~RunDirectory.scan` is asked of it."""

    @property
    def checkpoint_root(self) -> Path:
        return self.root


def _manifest_of(path: Path, words: SourceWords) -> Manifest:
    """The manifest in the file ``path``.

    Raises:
        CheckpointError: the file is no manifest (another JSON file), or a damaged one.
    """
    try:
        return Manifest.parse(read_manifest(path), path)
    except (ValueError, KeyError, TypeError) as exc:  # Manifest.parse's damage
        raise CheckpointDamaged(
            f"{words.source(path)}: no checkpoint's manifest, or a damaged one ({named(exc)}); "
            f"pass a run's {words.run_folder}, one of its checkpoints/step-N folders, or a "
            "checkpoint file"
        ) from None
