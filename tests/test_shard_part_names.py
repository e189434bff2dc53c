"""A run's file names number with ASCII digits alone: ``re``'s ``\\d`` matches any script's
digits, and ``int()`` reads them, so a file no distconv run writes,
``pserver-shard٠-step٥.safetensors`` (Arabic-Indic digits), counted as shard 0's part of step
5, which clearing a run and the checkpoint sweep deleted, and a folder ``step-٠٠٠٠٠٠٠١`` in
``checkpoints/`` as the orphaned step directory of step 1, which the sweep deleted whole.

Real files in a real run directory.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from distconv.run_dir import RunDirectory
from distconv.run_files import foreign_checkpoints, shard_parts

#: a shard's part of step 5, as a shard writes it
RUNS = "pserver-shard0-step5.safetensors"
#: the same name in Arabic-Indic digits (U+0660, U+0665): no run's
NOT_RUNS = "pserver-shard\u0660-step\u0665.safetensors"
#: a step directory's name in those digits (step 1): no run's
NOT_A_STEP_DIR = "step-" + "\u0660" * 7 + "\u0661"


def _file(path: Path, age: float = 3600.0) -> Path:
    """A file at ``path`` that says whose it is, written ``age`` seconds ago."""
    path.write_text(f"{path.name}\n")
    when = time.time() - age
    os.utime(path, (when, when))
    return path


def _commit(run: RunDirectory, step: int) -> None:
    chief = run.step_dir(step) / "chief.safetensors"
    chief.write_bytes(b"chief")
    run.commit(step, {"chief": chief})


@contextlib.contextmanager
def _run_beside_both_names(tmp_path: Path) -> Iterator[RunDirectory]:
    """A run directory (keeping 1 checkpoint) held, its step 10 committed, and a file named
    as a shard's part beside it in ASCII digits (``RUNS``) and in others (``NOT_RUNS``);
    released after."""
    run = RunDirectory(tmp_path / "out", keep=1)
    run.acquire()
    try:
        _commit(run, 10)
        for name in (RUNS, NOT_RUNS):
            _file(run.root / name)
        yield run
    finally:
        run.release()


def test_only_ascii_digits_name_a_shards_part_or_a_step_directory(tmp_path):
    _file(tmp_path / RUNS)
    _file(tmp_path / NOT_RUNS)
    (tmp_path / NOT_A_STEP_DIR).mkdir()
    assert shard_parts(tmp_path) == [tmp_path / RUNS]
    assert foreign_checkpoints(tmp_path) == sorted(
        str(tmp_path / name) for name in (NOT_RUNS, NOT_A_STEP_DIR)
    )


def test_clearing_a_run_leaves_a_file_named_in_other_digits(tmp_path):
    with _run_beside_both_names(tmp_path) as run:
        run.clear()
    assert not (run.root / RUNS).exists() and not run.holds_run()
    assert (run.root / NOT_RUNS).read_text() == f"{NOT_RUNS}\n"


def test_the_checkpoint_sweep_leaves_a_file_and_a_folder_named_in_other_digits(tmp_path):
    with _run_beside_both_names(tmp_path) as run:
        mine = run.checkpoint_root / NOT_A_STEP_DIR
        mine.mkdir()
        _file(mine / "notes.txt")
        _commit(run, 20)  # keeps step 20 alone: parts of a step before it, orphans, go
    assert not (run.root / RUNS).exists()
    assert (run.root / NOT_RUNS).read_text() == f"{NOT_RUNS}\n"
    assert (mine / "notes.txt").read_text() == "notes.txt\n"


def test_a_shards_own_prune_leaves_a_file_named_in_other_digits(tmp_path):
    """A shard prunes its old parts at each checkpoint: the file in other digits, named as its
    part of step 5, was deleted there too, or stood in for its real part of step 5."""
    from types import SimpleNamespace

    from distconv.sync.ps.parts import CheckpointParts

    shard = object.__new__(CheckpointParts)  # the mixin's prune reads these two alone
    shard.index, shard.config = 0, SimpleNamespace(checkpoint_dir=str(tmp_path))
    not_its = "pserver-shard0-step\u0665.safetensors"  # its own index, step 5 in other digits
    _file(tmp_path / "pserver-shard0-step10.safetensors")
    _file(tmp_path / not_its)
    assert shard.prune_parts(10, keep=1) == []
    assert (tmp_path / not_its).read_text() == f"{not_its}\n"
    _file(tmp_path / RUNS)  # beside a real part of step 5, that one goes, whichever is listed first
    assert shard.prune_parts(10, keep=1) == [tmp_path / RUNS]
    assert (tmp_path / not_its).exists()


def test_a_manifest_named_in_other_digits_is_no_checkpoint(tmp_path):
    """A checkpoint's manifest moved to ``step-٠٠٠٠٠٠٠٥.json``: a resume took it for step 5's
    checkpoint (the name said 5 to ``int()``); now it is named as no run names one."""
    run = RunDirectory(tmp_path / "out", keep=3)
    run.acquire()
    try:
        _commit(run, 5)
        written = run.checkpoint_root / "step-00000005.json"
        written.rename(written.with_name("step-" + "\u0660" * 7 + "\u0665.json"))
        found, problems = run.scan()
    finally:
        run.release()
    assert found == [] and len(problems) == 1, problems
    assert "is not in its name (step-N.json)" in problems[0]


def test_a_set_aside_manifest_named_in_other_digits_spares_no_shard_part(tmp_path):
    """``step-٥.json.unusable`` is no manifest the run set aside: the sweep spared step 5's
    shard parts for it, which no checkpoint of the run could ever use."""
    run = RunDirectory(tmp_path / "out", keep=1)
    run.acquire()
    try:
        _commit(run, 10)
        _file(run.root / RUNS)
        _file(run.checkpoint_root / "step-\u0665.json.unusable")
        _commit(run, 20)
    finally:
        run.release()
    assert not (run.root / RUNS).exists()
