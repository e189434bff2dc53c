"""A run's output directory: one owner at a time, step checkpoints tied together by manifests.

Layout (the names, and which files a run writes, are :mod:`distconv.run_files`'s)::

    <out>/run.lock                         held (flock) by the chief while the run lives
    <out>/run.claim                        the job id and launch that began the run
    <out>/checkpoints/step-00000120/...    the parts of the checkpoint of step 120
    <out>/checkpoints/step-00000120.json   its manifest, written last
    <out>/metrics.jsonl, metrics.png

A checkpoint is one unit: its manifest names every part (the chief's file, and each server
shard's where a parameter server holds state) and is written atomically only after every part
is on disk, so a checkpoint without a manifest is incomplete and never resumed from. Resume
takes the newest manifest whose parts all exist. The lock is an OS-level ``flock``, which the
kernel drops when its holder dies, so a restarted pod never meets a stale lock.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from distconv.checkpoint import CheckpointError, CheckpointReadError
from distconv.checkpoint_manifest import CHIEF as CHIEF  # resume and tests read it here
from distconv.checkpoint_manifest import Manifest
from distconv.checkpoint_scan import PART_INTACT, kept_checkpoint, scan_checkpoints
from distconv.checkpoint_sweep import remove_orphan_step_dirs, remove_stale_shard_parts
from distconv.checkpoints_link import late_disk_problem, recorded_mount
from distconv.files import (
    LockTaken,
    delete_files,
    delete_path,
    describe_os_error,
    folder_problem,
    write_atomically,
)
from distconv.metrics import MetricsError, read_metrics
from distconv.out_folder import out_folder_problem
from distconv.run_files import (
    CHECKPOINTS,
    CLAIM,
    LOCK,
    METRICS,
    PLOT,
    RUN_FILES,
    first_epoch_at_most,
    foreign_checkpoints,
    has_content,
    holds_checkpoints,
    named_by_manifest,
    shard_parts,
)
from distconv.run_files import CHIEF_PART as CHIEF_PART  # resume and tests read it here
from distconv.run_files import LEGACY_CHECKPOINT as LEGACY_CHECKPOINT  # resume reads it here
from distconv.run_holder import in_use_refusal, take_run_lock
from distconv.sampler import check_count
from distconv.short_lists import short_list

log = logging.getLogger("distconv.checkpoint")
_NAMED = 3  # the foreign files a refusal names; the rest counted
PRUNING = "not pruning old checkpoints now: %s"  # a save's warning: a later save prunes
#: a refused ``--resume``'s way on where there is nothing to go on from (a stop before the first
#: checkpoint, a mistyped ``--out``), its script's words after the command line's
AUTO_STARTS_AFRESH = (
    "--resume auto starts a fresh run where there is none (in a script: resume='auto', not True)"
)


class RunDirError(CheckpointError):
    """The run directory is taken, holds another run, or cannot be used; the message says how.
    One class (the launcher reads its name back), with what a caller may add to its words:

    Attributes:
        holder: who holds the directory's lock (``pid N on HOST``), where it is in use.
        ours: this run's facts as a checkpoint records them, where the directory holds a run
            (``already holds a run``): compared with that run's, they say how the two differ
            (:func:`~distconv.held_run.differences_from`).
    """

    def __init__(
        self, message: str, *, holder: str | None = None, ours: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.holder, self.ours = holder, ours


class RunDirectory:
    """The chief's handle on ``<out>``: the lock, the checkpoint directories and manifests.

    Args:
        root: the output directory; created if missing.
        keep: how many complete checkpoints to keep (older ones are deleted after a new one
            is complete).

    Raises:
        ValueError: ``keep`` is not an int >= 1 (a bool neither).
    """

    def __init__(self, root: str | os.PathLike, keep: int = 3) -> None:
        check_count("keep", keep, 1)  # 2.5 failed at the first prune, its manifest written
        self.root = Path(root)
        self.keep = keep
        self._lock_fd: int | None = None

    # -- ownership ------------------------------------------------------------------------------
    def acquire(self) -> None:
        """Take the directory's lock (tried for a moment: :func:`take_run_lock`), or fail naming
        the process that holds it (:attr:`RunDirError.holder`), its claim's job, and the way on."""
        if (problem := out_folder_problem(self.root)) is not None:
            raise RunDirError(problem)
        try:  # a read-only or full disk above it was 'cannot take <root>/run.lock', never tried
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirError(
                f"output directory {self.root} cannot be made: {describe_os_error(exc)}"
            ) from None
        try:
            self._lock_fd = take_run_lock(self.root / LOCK)
        except LockTaken as holder:
            said = str(holder)
            raise RunDirError(in_use_refusal(self.root, said), holder=said) from None
        except OSError as exc:  # a full disk, a read-only or foreign directory: name it
            raise RunDirError(f"cannot take {self.root / LOCK}: {describe_os_error(exc)}") from None

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def holds_run(self) -> bool:
        """Whether the directory already holds a run's files (finished or partial). An empty
        metrics log, all that a run which failed in its first epoch leaves, is none, and so is
        a first checkpoint cut short (:func:`~distconv.run_files.holds_checkpoints`)."""
        others = (LEGACY_CHECKPOINT, METRICS)
        return holds_checkpoints(self.root / CHECKPOINTS) or any(
            has_content(self.root / name) for name in others
        )

    def holds_legacy_only(self) -> bool:
        """Whether the directory's one checkpoint is a distconv's from before step checkpoints
        (:data:`~distconv.run_files.LEGACY_CHECKPOINT`, format version 1): no step checkpoint
        beside it, so that no resume continues it (:func:`~distconv.legacy_run.legacy_refusal`)."""
        return (self.root / LEGACY_CHECKPOINT).exists() and not holds_checkpoints(
            self.root / CHECKPOINTS
        )

    def clear(self) -> None:
        """Delete a previous run's checkpoints, metrics and claim (``--overwrite``), and the
        parameter-server shards' parts at the directory's top (``distconv-launch local``
        points the shards there): the old run's ``steplast`` part read as the new run's.

        A ``checkpoints`` that is a link to a directory (checkpoints kept on a larger disk)
        stays, emptied: the next run writes there too, and ``rmtree`` refuses a link. Being
        outside the run (a disk's top, a shared folder), one holding files no run writes is
        refused before anything is deleted. Other links go, never their targets. A link to a
        disk not mounted yet (:meth:`check_checkpoints_there`) is refused before anything is
        deleted too: the run's checkpoints are on it, which clearing the rest would leave
        behind; the link stays, never replaced by a folder here, for the attempt that finds the
        disk to clear the run. An empty folder is one only where the claim says so, not the
        metrics this deletes (a folder emptied by hand, another pointed to in the disk's place).

        Raises:
            RunDirError: a file cannot be deleted, that link's files are foreign, or its disk is
                not there: naming them.
        """
        self.check_checkpoints_there(by_metrics=False)
        linked = self.checkpoint_root.is_symlink() and self.checkpoint_root.is_dir()
        try:
            foreign = foreign_checkpoints(self.checkpoint_root) if linked else []
            if foreign:
                raise RunDirError(
                    f"cannot clear the run in {self.root}: {self.checkpoint_root} links to "
                    f"{self.checkpoint_root.resolve()}, which holds files no distconv run writes "
                    f"({short_list(foreign, _NAMED)}); move them away"
                )
            # the claim last: leftovers a failure midway leaves are still their launch's, and
            # its restart clears them again rather than refusing them as another run's
            files = [self.root / name for name in RUN_FILES]
            files += [*shard_parts(self.root), self.root / PLOT, self.root / CLAIM]
            for path in files:
                if path == self.checkpoint_root and linked:
                    for entry in path.iterdir():
                        delete_path(entry)
                elif path.exists():
                    delete_path(path)
        except OSError as exc:  # a RunDirError is none: it goes as it is
            raise RunDirError(
                f"cannot clear the run in {self.root}: {exc.filename or self.root}: "
                f"{describe_os_error(exc)}"
            ) from None

    def check_checkpoints_there(self, by_metrics: bool = True) -> None:
        """Raise a RunDirError naming a ``checkpoints`` linked to a disk not mounted yet
        (:func:`~distconv.checkpoints_link.late_disk_problem`): a launcher restarts it. Every
        start checks it before its first step (a resume before its scan, ``--overwrite`` in
        :meth:`clear`): a fresh start met it at its first save, its first epoch lost.
        ``by_metrics`` False: an empty folder is not read as one by the metrics' sign."""
        mounted_at = recorded_mount(self.root / CLAIM)  # all a run cut short early tells
        wrote = self._wrote_checkpoints if by_metrics else lambda: False
        if problem := late_disk_problem(self.checkpoint_root, wrote, mounted_at):
            raise RunDirError(problem)

    def clear_unfinished(self) -> None:
        """:meth:`clear` a run that never completed a checkpoint (``--resume auto`` starting
        fresh), unless the directory holds files no such run leaves: another tool's.

        Raises:
            RunDirError: naming such files; nothing is deleted.
        """
        foreign = foreign_checkpoints(self.checkpoint_root) + self._foreign_metrics()
        if foreign:
            raise RunDirError(
                f"{self.root} has no checkpoint to resume, and holds files that no distconv run "
                f"without one leaves ({short_list(foreign, _NAMED)}), which starting afresh would "
                "delete: move them away, or pass --overwrite (in a script: resume='overwrite')"
            )
        self.clear()

    def _wrote_checkpoints(self) -> bool:
        try:  # the metrics of a run past its first checkpoint, or its plot
            return bool(self._foreign_metrics())
        except RunDirError:  # metrics that cannot be read: no sign either way
            return False

    def _foreign_metrics(self) -> list[str]:
        """The metrics files, where they hold more than a run with no checkpoint leaves: the
        line of its first epoch at most (written before that epoch's checkpoint), and no plot
        (drawn after the last). A finished run whose checkpoints were deleted is not cleared."""
        foreign = [str(p) for p in [self.root / PLOT] if p.exists() or p.is_symlink()]
        path = self.root / METRICS
        if not has_content(path):
            return foreign
        try:
            records = read_metrics(path) if path.is_file() else None
        except MetricsError:
            records = None
        except OSError as exc:
            raise RunDirError(
                f"{self.root} has no checkpoint to resume, and its {path.name} cannot be read "
                f"({describe_os_error(exc)}) to tell whether starting afresh may delete it"
            ) from None
        if records is not None and first_epoch_at_most(records):
            return foreign
        return [str(path)] + foreign

    # -- checkpoints ----------------------------------------------------------------------------
    @property
    def checkpoint_root(self) -> Path:
        return self.root / CHECKPOINTS

    def step_dir(self, step: int) -> Path:
        """The directory the parts of step ``step`` go into (created).

        Raises:
            RunDirError: it cannot be made (a file or a dangling link in the way, a read-only
                or full disk), as a part that cannot be written is a CheckpointError.
        """
        path = self.checkpoint_root / f"step-{step:08d}"
        # checkpoints -> a larger disk, unmounted: '[Errno 17] File exists', naming no link
        if (problem := folder_problem(path)) is not None:
            raise RunDirError(f"cannot write a checkpoint into {path}: {problem}")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # was a bare '[Errno 30] Read-only file system: ...'
            raise RunDirError(
                f"cannot write a checkpoint into {path}: {describe_os_error(exc)}; "
                f"{kept_checkpoint(self.checkpoint_root)[1]}"
            ) from None
        return path

    def commit(
        self,
        step: int,
        parts: Mapping[str, str | os.PathLike],
        remote: Mapping[str, str] | None = None,
        job: str | None = None,
        launch: str | None = None,
    ) -> Manifest:
        """Write the manifest of step ``step`` once every part is on disk; prune old ones.

        ``remote`` names parts written elsewhere (a shard's own disk), already acknowledged by
        their writers; they are recorded, not checked, since this host may not see them.
        ``job`` and ``launch`` are the writing job's id and launch, which tell a restart its own
        run (see :meth:`~distconv.resume.StepCheckpoints.open`).

        Raises:
            CheckpointError: a part is missing (the checkpoint stays incomplete).
        """
        root = self.checkpoint_root
        relative = {}
        for name, path in parts.items():
            path = Path(path)
            if not path.is_file():
                raise CheckpointError(f"checkpoint part {name!r} of step {step} is missing: {path}")
            relative[name] = str(path.resolve().relative_to(root.resolve()))
        path = root / f"step-{step:08d}.json"
        manifest = Manifest(step, relative, path, dict(remote or {}), job, launch)
        try:
            write_atomically(path, [manifest.text().encode()])
        except OSError as exc:  # a CheckpointError, as the part's own write failing is
            raise CheckpointError(
                f"cannot write checkpoint manifest {path}: {describe_os_error(exc)}; "
                f"{kept_checkpoint(root)[1]}"
            ) from None
        self._prune()
        return manifest

    @contextmanager
    def saving(self, step: int) -> Iterator[None]:
        """Around the save of step ``step``'s parts and its :meth:`commit`: where it fails, its
        step directory goes (:meth:`discard`), and the error of a part that could not be written
        (a full disk) names the checkpoint the run keeps, or says none is, where it said that
        "any checkpoint before it is intact", naming none, and said so where there was none."""
        try:
            yield
        except CheckpointError as exc:
            self.discard(step)
            if type(exc) is not CheckpointError or not str(exc).endswith(PART_INTACT):
                raise
            said = str(exc).removesuffix(PART_INTACT)
            raise CheckpointError(f"{said}{kept_checkpoint(self.checkpoint_root)[1]}") from None
        except BaseException:  # a second Ctrl-C: what it left would keep a full disk full
            self.discard(step)
            raise

    def discard(self, step: int) -> None:
        """Delete the step directory of a save that could not commit (its manifest met a full
        disk): a checkpoint never resumed from, whose room the save's retry needs. One that a
        manifest names (the step saved before, its part since replaced whole) stays."""
        folder = self.checkpoint_root / f"step-{step:08d}"
        if not named_by_manifest(folder) and folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)

    def manifests(self) -> list[Manifest]:
        """Complete checkpoints, oldest first (manifests whose parts all exist)."""
        return self.scan()[0]

    def scan(self) -> tuple[list[Manifest], list[str]]:
        """Complete checkpoints, oldest first, and a sentence for each manifest that is not
        usable (damaged, or naming a part that is missing or not a file).

        Raises:
            CheckpointReadError: the OS could not read a manifest or look at a part (an I/O
                error, a permission): it may be whole, so it is not passed over for an older one.
        """
        return scan_checkpoints(self.checkpoint_root)

    def latest(self) -> Manifest | None:
        """The newest complete checkpoint, or None."""
        found = self.manifests()
        return found[-1] if found else None

    def set_aside(self, manifest: Manifest) -> Path:
        """Move an unusable checkpoint out of the scan, keeping its files for inspection: its
        step directory to ``step-N.unusable`` (replacing one set aside before), then its
        manifest to ``step-N.json.unusable``, naming its parts where they now are. In place, the
        run's save of that step again wrote over them; a manifest naming them where they were
        named that save's parts instead. Returns the manifest's new path; raises RunDirError
        where either cannot be moved."""
        folder, moved = manifest.path.with_suffix(""), manifest.path.with_suffix(".unusable")
        aside = replace(manifest, path=Path(f"{manifest.path}.unusable"))
        try:  # the directory first: a manifest left behind it names missing parts, skipped
            if folder.is_dir() and not folder.is_symlink():
                if os.path.lexists(moved):
                    delete_path(moved)  # one set aside before, replaced as its manifest is
                folder.rename(moved)
                aside = aside.moved(folder.name, moved.name)
            write_atomically(aside.path, [aside.text().encode()])
            manifest.path.unlink()
        except OSError as exc:  # was a bare '[Errno 39] Directory not empty', the manifest moved
            why = f"{exc.filename}: {describe_os_error(exc)}"
            raise RunDirError(f"cannot set aside checkpoint {manifest.path}: {why}") from None
        return aside.path

    def _prune(self) -> None:
        try:  # a failure is a warning: this save's checkpoint is whole, and a later save prunes
            complete = self.manifests()
        except (CheckpointReadError, OSError) as exc:  # a listing that failed too
            log.warning(PRUNING, exc)
            return
        # each on its own (EACCES, EROFS: a warning): one that cannot go kept every newer one
        for manifest in delete_files([m.path for m in complete[: -self.keep]], log, PRUNING):
            shutil.rmtree(self.checkpoint_root / manifest.stem, ignore_errors=True)
        if complete:  # what nothing else would ever delete (checkpoint_sweep.py)
            kept, pruned = complete[-self.keep :], complete[: -self.keep]
            remove_orphan_step_dirs(self.checkpoint_root, kept[0].step)
            remove_stale_shard_parts([self.root, self.checkpoint_root], kept, pruned)
