"""The runs a folder of runs (``runs/``) holds that a resume can go on with, in both layouts
that write there, and the ``--out`` that resumes each.

``distconv train`` without ``--out`` trains in ``runs/<data>-<optimizer>-seed<seed>``, whose
``checkpoints/`` is the run's; ``distconv-launch`` gives each job ``runs/<job-id>``, whose
``train/`` is the run's output directory. A hint that looked for one layout alone sent the user
who moved a run from one command to the other to the wrong fix, or said ``runs/`` held no run.
Both :mod:`distconv.default_out` and :mod:`launcher.resume_run_dir` name runs from this scan.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from distconv.checkpoints_link import NOT_MOUNTED
from distconv.messages import shell_word
from distconv.run_files import CHECKPOINTS, holds_checkpoints
from distconv.run_holder import lock_holder
from distconv.short_lists import short_list

#: the output directory ``distconv train`` writes to in a launch's run directory
LAUNCH_TRAIN = "train"

#: where a run's checkpoints folder lies in an entry of a folder of runs, and whether that
#: layout is a launch's (its output directory its ``train/``)
_LAYOUTS = ((CHECKPOINTS, False), (os.path.join(LAUNCH_TRAIN, CHECKPOINTS), True))

#: at most this many runs of each layout are named in a hint, newest first; the rest counted
NAMED_RUNS = 3


@dataclass(frozen=True)
class ResumableRun:
    """A run in a folder of runs that holds a checkpoints folder.

    Attributes:
        name: the directory's name in that folder (a run's, or a launch's job id).
        out: the output directory that resumes it, the folder's path joined to ``name`` (and
            ``train`` for a launch's): what ``--out`` takes.
        launched: whether ``name`` is a launch's run directory (``distconv-launch --job-id``).
        running: who holds its run lock now (``pid N on HOST``:
            :func:`~distconv.run_holder.lock_holder`), or None: a run still training, which a
            resume now is refused (``... is in use by ...``), so a hint marks it.
    """

    name: str
    out: str
    launched: bool
    running: str | None = None

    @property
    def marked(self) -> str:
        """`` (running, pid N on HOST)`` after the run's name in a hint, or ''."""
        return f" (running, {self.running})" if self.running else ""


def resumable_runs(runs: str | os.PathLike[str]) -> list[ResumableRun]:
    """The runs in ``runs`` that hold a checkpoints folder, directly (``distconv train``'s) or
    in their ``train/`` (a launch's), newest first by that folder's last change (a new
    checkpoint, not the run's other files). A checkpoints folder that holds nothing, or only
    what a first checkpoint cut short leaves (:func:`~distconv.run_files.holds_checkpoints`),
    is no run to resume: ``--resume`` there is refused. Empty where ``runs`` is missing or
    unreadable; an entry gone meanwhile or out of reach is left out. A run still training
    is in, marked (:attr:`ResumableRun.running`): left out, the run the user meant looked lost."""
    found = []
    try:
        with os.scandir(runs) as entries:
            for entry in entries:
                if (run := _resumable(entry)) is not None:
                    found.append(run)
    except OSError:  # no such folder, or none readable: none to name
        return []
    return [run for _, run in sorted(found, key=lambda held: held[0], reverse=True)]


def _resumable(entry: os.DirEntry[str]) -> tuple[float, ResumableRun] | None:
    """When ``entry``'s checkpoints folder last changed, and the run; None where it has none
    (or is no directory itself)."""
    for inner, launched in _LAYOUTS:
        checkpoints = os.path.join(entry.path, inner)
        try:  # a checkpoints folder linked to another disk counts: stat reads through the link
            held = os.stat(checkpoints)
            is_dir = entry.is_dir() and stat.S_ISDIR(held.st_mode)
            is_run = is_dir and holds_checkpoints(Path(checkpoints))
        except OSError:  # none in it, gone meanwhile, out of reach: that entry alone
            continue
        if is_run:
            out = _out(entry, launched)
            return held.st_mtime, ResumableRun(entry.name, out, launched, lock_holder(out))
    return None


def unmounted_runs(runs: str | os.PathLike[str]) -> list[str]:
    """The output directories in ``runs`` (either layout, as :class:`ResumableRun`'s ``out``)
    whose checkpoints folder is a link to nothing, its disk not mounted yet: not resumable now,
    so :func:`resumable_runs` leaves them out, but no hint should pass over them in silence.
    Sorted by name; empty where ``runs`` is missing or unreadable."""
    try:
        with os.scandir(runs) as entries:
            found = [out for entry in entries if (out := _unmounted(entry)) is not None]
    except OSError:  # no such folder, or none readable: none to name
        return []
    return sorted(found)


def not_resumable_now(runs: str | os.PathLike[str], but: str = "") -> str:
    """``; not resumable now: runs/a or runs/L3/train, whose checkpoints link to nothing (a
    disk not mounted yet?)``: the runs :func:`unmounted_runs` finds in ``runs`` (less ``but``,
    one a caller names itself), as a hint adds them after the runs to resume; '' for none."""
    unmounted = [path for path in unmounted_runs(runs) if path != but]
    if not unmounted:
        return ""
    return (
        f"; not resumable now: {paths_listed(unmounted)}, whose checkpoints link to nothing "
        f"{NOT_MOUNTED}"
    )


def _unmounted(entry: os.DirEntry[str]) -> str | None:
    """The output directory of ``entry`` whose checkpoints link to nothing; None: none does."""
    for inner, launched in _LAYOUTS:
        checkpoints = os.path.join(entry.path, inner)
        if os.path.islink(checkpoints) and not os.path.exists(checkpoints):
            return _out(entry, launched)
    return None


def _out(entry: os.DirEntry[str], launched: bool) -> str:
    """The output directory of the run ``entry`` holds: a launch's is its ``train/``."""
    return os.path.join(entry.path, LAUNCH_TRAIN) if launched else entry.path


def out_flags(runs: list[ResumableRun], most: int = NAMED_RUNS, after: str = "") -> str:
    """``--out runs/a, --out runs/L1/train (running, pid 7 on vm) or 2 more``: the flags that
    resume the first ``most`` of ``runs``, each followed by ``after`` (`` --resume``) and the
    mark of a run still training (:attr:`ResumableRun.marked`), each path a shell word that
    pastes back as the same path (one with a space or a line break in it is quoted)."""
    return _choice([f"--out {shell_word(run.out)}{after}{run.marked}" for run in runs], most)


def paths_listed(paths: list[str], most: int = NAMED_RUNS) -> str:
    """``runs/a, runs/b or 2 more``: the first ``most`` of ``paths``, each a shell word."""
    return _choice([shell_word(path) for path in paths], most)


def _choice(words: list[str], most: int) -> str:
    """``a, b or 2 more``: the first ``most`` of ``words``, the rest counted, as one to pick."""
    return short_list(words, most, choice=True)
