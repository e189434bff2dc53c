"""A shard's checkpoint part: its blocks, their optimizer state and the table, in one file.

Parts are pruned by the shard that writes them, since they live on its own disk, which the
chief may not see. After writing the part of step ``S`` the shard keeps the parts of its
``keep`` newest steps up to ``S`` and deletes the others: older ones, as the chief deletes its
old checkpoints, and any of a step after ``S``, left by an attempt the job rolled back from when
it resumed at an earlier checkpoint. ``keep`` comes with the request (the chief's number of
kept checkpoints), else from ``--keep-parts``; 0 keeps everything. The ``steplast`` part that
SIGTERM writes is never pruned.

The shard makes ``--checkpoint-dir`` (and the folders above it that are missing) here, at its
first part, not when it starts: under ``distconv-launch local`` it is the chief's ``--out``, and
a folder the shards had made at start turned a refused ``--resume`` into that directory (``...
does not exist``) into one of an empty directory, which the chief had then locked, leaving its
``run.lock`` there. ``distconv pserver`` checks at start that the folder can be made
(``cli._check_checkpoint_dir``), without making it.

Parts are never read back: the chief's checkpoint holds every block's values (the weights) and
optimizer state (gathered with ``get_state``), and a resume reseeds fresh shards from it. So
the parts in the chief's own directory that no shard will prune (a run moved off the parameter
server, or onto fewer shards; a ``steplast``) the chief's prune sweeps once its oldest kept
checkpoint has passed them (:mod:`distconv.checkpoint_sweep`). For the same reason a part the
disk cannot take (full, a quota) is a warning, in the shard's log and the chief's, said once
per kind of failure (:mod:`~distconv.sync.ps.part_failures`), and the chief writes its own
checkpoint and goes on (:meth:`CheckpointParts.save_requested_part`). A disk with
no room (``ENOSPC``, ``EDQUOT``) first has the shard prune as the part written would have, less
the part itself, and write it once more: pruning followed only a written part, so a disk that
filled stayed full for the rest of the job.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
from pathlib import Path

import numpy as np

from distconv.files import MadeFolder, delete_files, describe_os_error, folder_problem
from distconv.sync.ps.part_failures import (
    EXTRA_COPY,
    SAID_ONCE,
    PartFailures,
    failure_kind,
    failures_of,
    no_room,
)
from distconv.sync.ps.state import _Refused

log = logging.getLogger("distconv.pserver")


#: how often :func:`make_folders` starts again when a level above vanishes as it makes one
_FOLDER_TRIES = 3


def make_folders(directory: Path) -> None:
    """``mkdir -p directory``, one level at a time, leaving nothing behind when it fails: the
    folders above ``directory`` that this call made are removed again (while empty: one that
    another process filled meanwhile stays). ``os.makedirs`` left them, so a last name too long
    or a full disk left empty folders behind a part that was not written.

    A level that another process makes at the same moment (another shard writing its first part
    of the same checkpoint) is taken as there: theirs, not made here, so never removed. That
    process may fail and remove it again before this call makes the level below (its own undo,
    as here): the levels are then looked at and made afresh.

    Raises:
        OSError: a level cannot be made (a file in the way, no room, a name too long).
    """
    made: list[MadeFolder] = []
    try:
        for tries_left in reversed(range(_FOLDER_TRIES)):
            try:
                _make_missing(directory, made)
                return
            except FileNotFoundError:  # a level above vanished: another shard's undo
                if not tries_left:
                    raise
    except OSError:
        for folder in reversed(made):  # each only while it is the one made here, and empty
            folder.remove()
        raise
    finally:
        for folder in made:  # held open until here: see MadeFolder
            folder.release()


def _make_missing(directory: Path, made: list[MadeFolder]) -> None:
    """Make the levels of ``directory`` that are not folders, from the top down, adding each
    made here to ``made``; one another process makes first is taken as there."""
    # os.path.isdir, not Path.is_dir: a name too long is no folder, not an error, in every Python
    there = (directory, *directory.parents)
    missing = list(itertools.takewhile(lambda p: not os.path.isdir(p), there))
    for folder in reversed(missing):
        try:
            made.append(MadeFolder.make(folder))
        except FileExistsError:
            if not os.path.isdir(folder):  # a file, or a dangling link
                raise


def _write_part(path: Path, tensors: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    """Write the part ``path``, making its folder first.

    Raises:
        CheckpointError: the folder or the part cannot be written, raised from the
            ``OSError`` (see :func:`~distconv.sync.ps.part_failures.no_room`).
    """
    from distconv.checkpoint import CheckpointError, save_tensors

    try:  # made here, at the first part, not at start: see the module's docstring
        make_folders(path.parent)
    except OSError as exc:  # a file in its place, a full disk, removed since the last part
        # a file or a dangling link in the way named, not mkdir's "file exists" after the
        # part's path, which read as the part being there already
        why = folder_problem(path.parent) or describe_os_error(exc)
        raise CheckpointError(f"cannot save checkpoint {path}: {why}") from None
    save_tensors(path, tensors, meta)


class CheckpointParts:
    """The checkpoint side of :class:`~distconv.sync.ps.server.Shard`."""

    def save_part(self, step: str, keep: int | None = None) -> Path:
        """Write this shard's blocks and optimizer state atomically; returns the file. A disk
        with no room for a numbered step's part first loses the old parts that part written
        would have pruned, and the part is tried once more (see the module).

        Args:
            step: the checkpoint's step (digits), or ``"last"`` on SIGTERM.
            keep: parts to keep after a numbered step (None: ``--keep-parts``; 0: all).

        Raises:
            CheckpointError: a block's optimizer count holds what is no count (a shard bug;
                nothing is written or pruned), or the part cannot be written.
        """
        from distconv.checkpoint import CheckpointError

        name = f"pserver-shard{self.index}-step{step}.safetensors"
        path = Path(self.config.checkpoint_dir) / name
        if problems := self._bad_counts():
            raise CheckpointError(
                f"cannot save checkpoint {path}: shard {self.index} holds optimizer counts "
                f"that are no count ({'; '.join(problems)}); the parts before are kept"
            )
        tensors = {}
        for bid, b in self.blocks.items():
            tensors[f"block.{bid}.value"] = b.value
            for k, a in b.state.items():
                tensors[f"block.{bid}.state.{k}"] = np.array(a, order="C")
        meta = {
            "shard": str(self.index),
            "step": step,
            "params": json.dumps([p.to_wire() for p in self.params]),
            "table": json.dumps(
                [[bid, b.param, b.start, b.stop] for bid, b in self.blocks.items()]
            ),
            "optimizer": json.dumps(self.optimizer.config() if self.optimizer else {}),
            "completed": json.dumps(self.completed),
        }
        keep = self.config.keep_parts if keep is None else keep
        try:
            _write_part(path, tensors, meta)
        except CheckpointError as exc:  # (its temporary file gone: see write_atomically)
            if not (step.isdigit() and no_room(exc) and self._made_room(int(step), keep)):
                raise
            _write_part(path, tensors, meta)  # once: a disk still full fails this part
        if step.isdigit():
            try:
                self.prune_parts(int(step), keep)
            except OSError as exc:  # the part is written: its checkpoint stands, a later prunes
                log.warning("shard %d: not pruning old checkpoint parts now: %s", self.index, exc)
        return path

    def _made_room(self, step: int, keep: int) -> bool:
        """Prune, where the disk had no room for the part of ``step``, as that part written
        would have, less itself: the parts of the ``keep - 1`` newest steps before ``step``
        stay (``keep`` 0: all), the rest go, that of ``step`` left by a rolled-back attempt
        too. Without this a full disk stayed full, since pruning followed a written part.
        Whether anything went, for the write to be tried again."""
        if keep <= 0:
            return False
        try:
            gone = self._prune(step - 1, keep - 1)
        except (FileNotFoundError, NotADirectoryError):  # no folder made: nothing to prune
            return False  # (said at each checkpoint, beside the part's warning said once)
        except OSError as exc:  # the folder unreadable: the part's own error is the one said
            log.warning("shard %d: not pruning old checkpoint parts now: %s", self.index, exc)
            return False
        if gone:  # (none: the part's own error says it, once)
            said = (
                "shard %d: no room for the part of step %d: pruned %d old part(s), writing it again"
            )
            log.info(said, self.index, step, len(gone))
        return bool(gone)

    def _bad_counts(self) -> list[str]:
        """Each block's optimizer count (Adam's ``step``) that is no count, by block and
        parameter: written, it went on into the chief's checkpoint (``get_state``) and was
        refused only at the resume, after the checkpoints before could have been pruned."""
        from distconv.checkpoint_checks import bad_counts

        return [
            f"block {bid} of {self.params[b.param].name!r}, state {key}: {what}"
            for bid, b in self.blocks.items()
            for key, what in bad_counts(b.state).items()
        ]

    def save_requested_part(self, step: int, keep: int | None) -> dict[str, str]:
        """:meth:`save_part` for the chief's ``checkpoint`` request; returns the reply's field:
        ``path``, the part written, or ``unwritten``, the line that says why none was.

        A part the disk cannot take (full, a quota, a file in the way) is a warning in this
        shard's log, once per kind of failure since its seed and once when the disk takes a
        part again (:mod:`~distconv.sync.ps.part_failures`), and the chief, told so, writes its own
        checkpoint and goes on: a part is never read back (see the module), and refusing it
        stopped the job and left the step without the chief's checkpoint too, the one a
        resume reads.

        Raises:
            _Refused: the part holds an optimizer count that is no count (a shard bug, which
                the chief's checkpoint would carry too): one line naming the file and the
                block, which the chief's error repeats, not a ``shard error`` traceback.
        """
        from distconv.checkpoint import CheckpointError

        try:
            path = self.save_part(str(step), keep)
        except CheckpointError as exc:
            if self._bad_counts():  # refused for what it holds, not by the disk
                raise _Refused(str(exc)) from None
            if self._part_failures.failed(self.index, failure_kind(str(exc), step)):
                log.warning("shard %d: %s; %s; %s", self.index, exc, EXTRA_COPY, SAID_ONCE)
            else:
                log.debug("shard %d: %s", self.index, exc)
            return {"unwritten": str(exc)}
        if self._part_failures.written(self.index):
            said = "shard %d: the shard's disk took its part again at step %d"
            log.warning(said, self.index, step)
        return {"path": str(path)}

    @property
    def _part_failures(self) -> PartFailures:
        """This shard's last failed part since its seed (each setup's, each job's)."""
        return failures_of(self.__dict__, self.seed_id)

    def prune_parts(self, step: int, keep: int) -> list[Path]:
        """Delete this shard's parts but those of its ``keep`` newest steps up to ``step``
        (``keep`` 0: none); returns the files deleted."""
        return self._prune(step, keep) if keep > 0 else []

    def _prune(self, step: int, keep: int) -> list[Path]:
        """:meth:`prune_parts`, where ``keep`` 0 keeps none."""
        # ASCII digits, as run_files.SHARD_PART: int() reads any script's, and such a file,
        # no shard's, was pruned or stood in for the step it spelled
        pattern = re.compile(rf"pserver-shard{self.index}-step([0-9]+)\.safetensors")
        parts = {}
        for path in Path(self.config.checkpoint_dir).iterdir():
            match = pattern.fullmatch(path.name)
            if match:
                parts[int(match.group(1))] = path
        kept = sorted(s for s in parts if s <= step)[-keep:] if keep else []  # [-0:]: all
        gone = [parts[s] for s in sorted(parts) if s not in kept]
        # each on its own: one that cannot go (its name taken by a directory) kept every newer
        said = f"shard {self.index}: not pruning old checkpoint parts now: %s"
        gone = delete_files(gone, log, said)
        if gone:  # every checkpoint: at INFO, with short epochs most of a launcher's output
            log.debug("shard %d: pruned %d old checkpoint part(s)", self.index, len(gone))
        return gone
