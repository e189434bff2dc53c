"""A run already in the output directory of a start given neither ``--resume`` nor
``--overwrite``: the refusal, and the settings in which that run differs from this one.

A sweep that left ``--out`` to its default (named by ``--data``, ``--optimizer`` and ``--seed``
alone) trained its second point into the first's directory: refused with "pass --resume ...,
--resume auto ..., or --overwrite", of which ``--resume`` is refused in turn (another ``--lr``)
and ``--overwrite`` deletes the first point's run. :mod:`distconv.default_out` says there which
settings differ, from :func:`differences_from`, in the words ``--resume``'s own check says them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distconv.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from distconv.resume_facts import run_differences
from distconv.run_dir import CHIEF, RunDirectory, RunDirError


def held_refusal(root: Path, ours: Mapping[str, Any]) -> RunDirError:
    """The refusal of ``root``, which holds a run (:meth:`RunDirectory.holds_run`), to a
    start given no ``--resume`` nor ``--overwrite``; ``ours``: this run's facts as a
    checkpoint records them (:func:`recorded_facts`'s form), kept for :func:`differences_from`.
    Its first words are read back by the launcher (:mod:`distconv.refused_starts`)."""
    return RunDirError(
        f"{root} already holds a run; pass --resume to continue it, --resume auto to continue "
        "it if it has a checkpoint, or --overwrite to replace it (in a script: resume=True, "
        "'auto' or 'overwrite')",
        ours=ours,
    )


def recorded_facts(ckpt: Checkpoint) -> dict[str, Any]:
    """The facts of the run ``ckpt`` comes from, as a resume compares them with its own."""
    return {**ckpt.extra, "seed": ckpt.seed, "optimizer": ckpt.optimizer}


def differences_from(root: Path, ours: Mapping[str, Any]) -> list[str]:
    """The settings in which the run in ``root`` (its newest complete checkpoint) differs from
    this run's facts ``ours``, each as ``--resume``'s refusal says it (``optimizer.lr:
    checkpoint 0.001, this run 0.01``); empty where none differs, or no checkpoint is complete
    or readable: a refusal then says nothing of them, as before."""
    try:
        newest = RunDirectory(root).latest()
        ckpt = load_checkpoint(newest.part(CHIEF)) if newest is not None else None
    except (CheckpointError, OSError):  # damaged, unreadable: no sign either way
        return []
    return run_differences(recorded_facts(ckpt), ours) if ckpt is not None else []
