"""The refusal of a run directory whose one checkpoint is a distconv's from before step
checkpoints (format version 1, :data:`~distconv.run_files.LEGACY_CHECKPOINT`): no resume continues
it (:meth:`~distconv.run_dir.RunDirectory.holds_legacy_only`), and no start replaces it unasked.
The launcher reads its words back (:mod:`distconv.refused_starts`) and restarts no such refusal."""

from __future__ import annotations

from pathlib import Path

from distconv.run_files import LEGACY_CHECKPOINT


def legacy_refusal(root: Path) -> str:
    """Why a run in ``root`` whose one checkpoint is a distconv's from before step checkpoints
    (:meth:`RunDirectory.holds_legacy_only`) is neither resumed nor replaced unasked, and how
    to go on. That file holds the old run's only weights, which ``--overwrite`` deletes, so it
    is said first how to load them (:func:`~distconv.checkpoint.restore_checkpoint`) and keep
    them; ``--resume`` is not advised: it is refused too."""
    return (
        f"{root} holds a checkpoint of an older distconv ({LEGACY_CHECKPOINT}, format version 1, "
        "from before step checkpoints), which this version cannot resume. It holds that run's "
        "weights (distconv.checkpoint.restore_checkpoint(path, params) loads them into a "
        f"model), which --overwrite deletes: to keep them, move it out of {root} first; then "
        "pass --overwrite to replace the run (in a script: resume='overwrite'), or train in "
        "another output directory (--out)"
    )
