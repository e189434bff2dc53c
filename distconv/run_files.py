"""The names in a run's output directory, and which files there a distconv run writes.

:class:`distconv.run_dir.RunDirectory` reads them to hold, clear and prune a run: what marks a
directory as holding one, the files of a run that never finished a checkpoint, and the files
no run writes, which clearing refuses to delete.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

LOCK = "run.lock"
#: who began the run (:mod:`distconv.job_start`): no run file, since a run that failed in its
#: first epoch, leaving it and an empty metrics log, is none
CLAIM = "run.claim"
CHECKPOINTS = "checkpoints"
CHIEF_PART = "chief.safetensors"
#: the single checkpoint file of distconv 0.1, before step checkpoints
LEGACY_CHECKPOINT = "checkpoint.safetensors"
#: files that mark a directory as holding a run, in the order clear() deletes them: the
#: checkpoints before their metrics, which a failure midway must not leave behind them
METRICS, PLOT = "metrics.jsonl", "metrics.png"
RUN_FILES = (CHECKPOINTS, LEGACY_CHECKPOINT, METRICS)
#: what a run writes in ``checkpoints/``: step directories of parts, manifests (and those set
#: aside), parameter-server shards' parts (their directory may be this one), and the temporary
#: files of a write a crash cut short. Their numbers are ASCII digits, [0-9], never ``\d``:
#: that matches any script's digits, which ``int()`` reads too, so ``step-٠٠٠٠٠٠٠١`` or
#: ``pserver-shard٠-step٥.safetensors``, no run's, was taken for one, cleared and swept
STEP_DIR = re.compile(r"step-[0-9]{8,}")
_PART = re.compile(rf"\.?{re.escape(CHIEF_PART)}(\..+\.tmp)?")
#: a parameter-server shard's checkpoint part (:mod:`distconv.sync.ps.parts`): in
#: ``checkpoints/``, or at the top of the output directory, where ``distconv-launch local``
#: points the shards' ``--checkpoint-dir``
SHARD_PART = r"pserver-shard[0-9]+-step([0-9]+|last)\.safetensors"
_MANIFEST = re.compile(rf"\.?(step-[0-9]{{8,}}\.json(\.unusable)?|{SHARD_PART})(\..+\.tmp)?")
#: a shard's part, or the temporary file of its write that a crash cut short
_SHARD_PART_FILE = re.compile(rf"\.?{SHARD_PART}(\..+\.tmp)?")
#: the temporary file of a manifest's write that a crash cut short: no manifest yet
_MANIFEST_WRITE = re.compile(r"\.step-[0-9]{8,}\.json\.[0-9a-f]+\.tmp")


def foreign_checkpoints(root: Path) -> list[str]:
    """What a run's checkpoints folder ``root`` holds that no distconv run writes there: the
    paths, or ``root`` itself where it is no directory; empty where it is missing."""
    if not root.is_dir():
        return [str(root)] if root.exists() or root.is_symlink() else []
    foreign = []
    for entry in sorted(root.iterdir()):
        step = STEP_DIR.fullmatch(entry.name.removesuffix(".unusable"))  # or set aside
        if entry.is_dir() and not entry.is_symlink() and step:
            foreign += [str(f) for f in sorted(entry.iterdir()) if not _PART.fullmatch(f.name)]
        elif not (entry.is_file() and _MANIFEST.fullmatch(entry.name)):
            foreign.append(str(entry))
    return foreign


def shard_parts(root: Path) -> list[Path]:
    """The shards' checkpoint parts at the top of ``root`` (and their writes a crash cut
    short): files, or links (never what they point at); none where ``root`` is no directory.

    Raises:
        OSError: ``root`` cannot be read.
    """
    if not root.is_dir():
        return []
    return [
        entry
        for entry in sorted(root.iterdir())
        if _SHARD_PART_FILE.fullmatch(entry.name) and (entry.is_symlink() or entry.is_file())
    ]


def named_by_manifest(step_dir: Path) -> bool:
    """Whether a manifest names ``step_dir``: its own, or one set aside that left it in place
    (an older distconv, or a directory that could not move). One set aside beside a
    ``step-N.unusable`` holds its files there: ``step-N`` is then the step saved again."""
    beside = [step_dir.with_name(step_dir.name + end) for end in (".json", ".json.unusable")]
    if os.path.lexists(beside[0]):
        return True
    return os.path.lexists(beside[1]) and not os.path.lexists(f"{step_dir}.unusable")


def first_epoch_at_most(records: list[dict]) -> bool:
    """Whether ``records`` are what a run leaves before its first checkpoint: none, or the
    line of epoch 1."""
    if not records:
        return True
    epoch = records[0].get("epoch")
    return len(records) == 1 and type(epoch) is int and epoch == 1


def has_content(path: Path) -> bool:
    """Whether ``path`` exists and is not an empty file or directory."""
    if path.is_dir():
        return any(path.iterdir())
    return path.exists() and not (path.is_file() and path.stat().st_size == 0)


def holds_checkpoints(root: Path) -> bool:
    """Whether a run's checkpoints folder ``root`` holds anything but what a first checkpoint
    cut short (SIGKILL, a second Ctrl-C) leaves: a step directory no manifest names, holding
    at most the chief's part, whole or not, and the temporary file of its manifest's write
    (killed before the rename, which no scan reads). That is no checkpoint, so no run."""
    if not root.is_dir():  # a link to one is read through (checkpoints on a larger disk)
        return has_content(root)
    return any(not _cut_short(entry) for entry in root.iterdir())


def _cut_short(entry: Path) -> bool:
    if _MANIFEST_WRITE.fullmatch(entry.name):
        return entry.is_file() and not entry.is_symlink()
    if not (STEP_DIR.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink()):
        return False
    return not named_by_manifest(entry) and all(_PART.fullmatch(f.name) for f in entry.iterdir())
