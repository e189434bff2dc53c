"""Which checkpoints a run keeps: the scan of ``<out>/checkpoints`` that a resume goes by
(:func:`scan_checkpoints`), and the words naming the newest one (:func:`kept_checkpoint`),
which a failed save and the launcher's report of a crash end with: the operator learns where
the run would go on from without listing the folder.

A checkpoint is complete where its manifest (``step-N.json``, written last) parses and every
part it names is a file; a manifest without one, or a step folder without a manifest, is no
checkpoint and is never resumed from.
"""

from __future__ import annotations

from pathlib import Path

from distconv.checkpoint_errors import CheckpointReadError
from distconv.checkpoint_manifest import CHIEF, Manifest
from distconv.manifest_reads import ManifestNotAFile, is_part_file, read_manifest
from distconv.messages import named

#: what a failure's words say where the run kept no complete checkpoint: nothing to go on
#: from. Not "the same command": past its first epoch a run without --resume is refused
NONE_KEPT = "no checkpoint kept yet: --resume auto starts afresh"
#: how :func:`distconv.checkpoint.save_tensors`'s error of a part it could not write ends,
#: which a run's save replaces with the checkpoint it keeps
#: (:meth:`distconv.run_dir.RunDirectory.saving`)
PART_INTACT = "any checkpoint before it is intact"


def scan_checkpoints(root: Path) -> tuple[list[Manifest], list[str]]:
    """The complete checkpoints in ``root`` (a run's ``checkpoints`` folder), oldest first, and a
    sentence for each manifest that is not usable (damaged, or naming a part that is missing or
    not a file). A ``root`` that does not exist holds none.

    Raises:
        CheckpointReadError: the OS could not read a manifest or look at a part (an I/O error,
            a permission): it may be whole, so it is not passed over for an older one.
    """
    found, problems = [], []
    for path in sorted(root.glob("step-*.json")):
        try:
            raw = read_manifest(path)
        except FileNotFoundError:  # gone since the listing: not a checkpoint any more
            continue
        except IsADirectoryError:
            problems.append(f"{path} is a directory, not a manifest")
            continue
        except ManifestNotAFile as exc:  # a named pipe: opened, it hung for ever
            problems.append(str(exc))
            continue
        try:
            manifest = Manifest.parse(raw, path)
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{path} is damaged ({named(exc)})")
            continue
        bad = [str(p) for p in map(manifest.part, manifest.parts) if not is_part_file(p)]
        if bad:
            problems.append(f"{path} names parts that are missing or not files: {bad}")
        else:
            found.append(manifest)
    # by step, not by name: past step 99,999,999 the name has nine digits and sorts first
    return sorted(found, key=lambda m: m.step), problems


def newest_kept(root: Path) -> Manifest | None:
    """The newest complete checkpoint in ``root`` (:func:`scan_checkpoints`), or None.

    Raises:
        CheckpointReadError: as :func:`scan_checkpoints`.
    """
    found = scan_checkpoints(root)[0]
    return found[-1] if found else None


def kept_checkpoint(root: Path) -> tuple[Manifest | None, str]:
    """The newest complete checkpoint in ``root`` (None: none, or none can be told) and the
    words that name it: ``the newest checkpoint kept is step 20 (PATH)``, PATH its chief's
    part, the file a resume loads first; :data:`NONE_KEPT` where ``root`` holds none; or why it
    cannot be told, where a manifest cannot be read (a failure's words must not fail)."""
    try:
        newest = newest_kept(root)
    except (CheckpointReadError, OSError) as exc:
        return None, f"which checkpoint is kept cannot be told: {exc}"
    if newest is None:
        return None, NONE_KEPT
    return newest, f"the newest checkpoint kept is step {newest.step} ({newest.part(CHIEF)})"
