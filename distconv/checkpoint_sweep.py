"""What the chief's prune sweeps besides the checkpoints it deletes: leftovers older than the
oldest checkpoint it keeps, which nothing else would ever delete.

- A step directory that no manifest names: a prune killed between a manifest and its directory
  left one, which no later prune saw, a whole checkpoint's bytes for good.
- A parameter-server shard's part (``pserver-shard<i>-step<S>.safetensors``, and the
  ``steplast`` one a stop writes) at the top of the run directory or of its ``checkpoints``
  (where ``distconv-launch`` points the shards' ``--checkpoint-dir``). Parts are never read
  back (:mod:`distconv.sync.ps.parts`), and only a shard of the same index prunes them, so a
  run moved off the parameter server (or onto fewer shards) kept each, weights and optimizer
  state, for good.

A shard writes its part of step S before the chief commits S's manifest, then prunes its own
parts down to its ``keep`` newest; it writes ``steplast`` when it stops. So a numbered part is
swept only below the oldest kept checkpoint's step (a part being written is for a step not yet
committed, above it), never one a kept manifest (or one set aside, kept for inspection) names;
and a ``steplast`` part only where its file is older than the oldest kept manifest's: the
state of a stop that ``keep`` checkpoints since have passed, not the one a shard stopping now
writes. Writes cut short (``.<part>.<random>.tmp``) stay: such a file may be a live shard's
write in progress.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from distconv.checkpoint_manifest import Manifest
from distconv.files import delete_files
from distconv.run_files import SHARD_PART, STEP_DIR, named_by_manifest, shard_parts

log = logging.getLogger("distconv.checkpoint")

_PART = re.compile(SHARD_PART)
#: a manifest set aside (``RunDirectory.set_aside``), which says its step
_SET_ASIDE = re.compile(r"step-([0-9]+)\.json\.unusable")


def remove_orphan_step_dirs(checkpoint_root: Path, oldest_kept: int) -> None:
    """Delete step directories older than the oldest kept checkpoint (step ``oldest_kept``)
    that no manifest (nor one set aside) names. A step directory after the oldest kept may be
    a checkpoint being written, and stays."""
    try:
        entries = list(checkpoint_root.iterdir())
    except OSError as exc:  # a later save sweeps; this one's checkpoint is safe
        log.warning("not looking for orphaned checkpoint directories now: %s", exc)
        return
    for entry in entries:
        if not (STEP_DIR.fullmatch(entry.name) and entry.is_dir()) or entry.is_symlink():
            continue
        if int(entry.name[5:]) < oldest_kept and not named_by_manifest(entry):
            shutil.rmtree(entry, ignore_errors=True)


def remove_stale_shard_parts(
    folders: Iterable[Path], kept: Sequence[Manifest], pruned: Sequence[Manifest] = ()
) -> list[Path]:
    """Delete the shards' parts at the top of each of ``folders`` that are older than the
    oldest of ``kept`` (the complete checkpoints the prune keeps, oldest first), that no kept
    manifest names, and of no set-aside checkpoint's step (the module's docstring says
    which); the files deleted. A folder that cannot be read is a warning, and nothing is
    deleted: a later save sweeps.

    The parts that ``pruned`` (the checkpoints this prune deleted) name go without a word at
    INFO: a live shard keeps one part more than the chief's checkpoints (docs/protocol.md,
    "Pruning"), which goes so at every save; said each time, it filled a run's log."""
    if not kept:
        return []
    oldest = kept[0]
    try:
        oldest_written = oldest.path.stat().st_mtime
    except OSError as exc:  # gone or unreadable since the scan: sweep at a later save
        log.warning("not removing old shard checkpoint parts now: %s", exc)
        return []
    named = {Path(p).name for m in kept for p in m.remote.values()}
    stale = []
    try:
        spared = _set_aside_steps(oldest.path.parent)
        for folder in folders:
            stale += [
                e
                for e in shard_parts(folder)
                if e.name not in named and _older(e, oldest.step, oldest_written, spared)
            ]
    except OSError as exc:  # a folder that cannot be read: a later save sweeps
        log.warning("not removing old shard checkpoint parts now: %s", exc)
        return []
    gone = delete_files(stale, log, "not removing old shard checkpoint parts now: %s")
    _say_removed(gone, oldest.step, {Path(p).name for m in pruned for p in m.remote.values()})
    return gone


def _say_removed(gone: Sequence[Path], oldest_step: int, pruned_names: set[str]) -> None:
    """Log the parts ``gone``: at INFO those of no checkpoint pruned now (``pruned_names``:
    a run moved off the shards, a ``steplast``), the others at DEBUG."""
    told = [p for p in gone if p.name not in pruned_names]
    if told:
        log.info(
            "removed %d shard checkpoint part(s) older than the oldest kept checkpoint "
            "(step %d), which no checkpoint names: %s",
            len(told),
            oldest_step,
            ", ".join(p.name for p in told),
        )
    if len(told) < len(gone):
        log.debug("removed %d part(s) of the checkpoints pruned now", len(gone) - len(told))


def _set_aside_steps(checkpoint_root: Path) -> set[int]:
    """The steps of the manifests set aside in ``checkpoint_root``."""
    return {int(m[1]) for e in checkpoint_root.iterdir() if (m := _SET_ASIDE.fullmatch(e.name))}


def _older(entry: Path, oldest_step: int, oldest_written: float, spared: set[int]) -> bool:
    """Whether ``entry``, one of :func:`~distconv.run_files.shard_parts`, is a whole part that
    the oldest kept checkpoint has passed (a write cut short is not: a live shard's): a
    numbered one below its step (not a set-aside checkpoint's), a ``steplast`` written before
    its manifest."""
    if (found := _PART.fullmatch(entry.name)) is None:
        return False
    try:
        written = entry.lstat()
    except OSError:  # gone meanwhile (its shard's own prune)
        return False
    step = found[1]
    if step == "last":
        return written.st_mtime < oldest_written
    return int(step) < oldest_step and int(step) not in spared
