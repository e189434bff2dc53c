"""The chief's prune removes the parameter-server shards' parts that the oldest checkpoint it
keeps has passed: parts are never read back, and only a shard of the same index prunes them,
so a run moved off the parameter server kept each (weights and optimizer state) for good.

Real files in a real run directory, and a real run moved off real shards."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from distconv.run_dir import RunDirectory


def _part(folder: Path, shard: int, step: int | str, age: float = 0.0) -> Path:
    """A shard's part of ``step`` in ``folder``, written ``age`` seconds ago."""
    path = folder / f"pserver-shard{shard}-step{step}.safetensors"
    path.write_bytes(b"part")
    when = time.time() - age
    os.utime(path, (when, when))
    return path


def _save(run: RunDirectory, step: int, shards: int = 1) -> None:
    """A checkpoint of ``step`` whose shards' parts lie at the run's top, as under
    ``distconv-launch``: each part written, then the manifest naming them committed."""
    chief = run.step_dir(step) / "chief.safetensors"
    chief.write_bytes(b"chief")
    remote = {f"pserver-shard{s}": str(_part(run.root, s, step)) for s in range(shards)}
    run.commit(step, {"chief": chief}, remote=remote)


def _names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.name.startswith((".pserver", "pserver"))}


def test_parts_the_oldest_kept_checkpoint_passed_go_the_rest_stay(tmp_path):
    run = RunDirectory(tmp_path / "out", keep=2)
    run.acquire()
    try:
        _save(run, 10, shards=2)  # a parameter-server stretch of the run, on two shards
        _save(run, 20, shards=2)
        _part(run.root, 0, "last", age=3600)  # its shards' stop, an hour ago
        _part(run.checkpoint_root, 1, 5)  # a part left in checkpoints/ (no --out given)
        (run.root / ".pserver-shard0-step40.safetensors.a1b2.tmp").write_bytes(b"")
        for step in (30, 40):  # then local: no parts
            chief = run.step_dir(step) / "chief.safetensors"
            chief.write_bytes(b"chief")
            run.commit(step, {"chief": chief})
        _part(run.root, 0, 50)  # a live shard's part of a step not committed yet
        _part(run.root, 0, "last")  # a shard stopping now
        chief = run.step_dir(45) / "chief.safetensors"  # kept: 40, 45 (step 30 pruned)
        chief.write_bytes(b"chief")
        run.commit(45, {"chief": chief})
    finally:
        run.release()
    assert _names(run.root) == {
        "pserver-shard0-step50.safetensors",
        "pserver-shard0-steplast.safetensors",
        ".pserver-shard0-step40.safetensors.a1b2.tmp",
    }
    assert _names(run.checkpoint_root) == set()


def test_a_part_a_kept_or_set_aside_checkpoint_names_stays(tmp_path):
    run = RunDirectory(tmp_path / "out", keep=1)
    run.acquire()
    try:
        _save(run, 10)
        _save(run, 20)
        aside = run.set_aside(run.latest())  # step 20's checkpoint, kept for inspection
        assert aside.name == "step-00000020.json.unusable"
        old = _part(run.root, 0, 15)
        chief = run.step_dir(30) / "chief.safetensors"
        chief.write_bytes(b"chief")
        # a manifest naming an older part (as a shard that names its own file may)
        run.commit(30, {"chief": chief}, remote={"pserver-shard0": str(old)})
    finally:
        run.release()
    assert _names(run.root) == {
        "pserver-shard0-step15.safetensors",
        "pserver-shard0-step20.safetensors",
    }


def test_the_parts_of_a_checkpoint_pruned_now_go_without_a_line_at_info(tmp_path, caplog):
    """A live shard keeps one part more than the chief's checkpoints, which the sweep takes
    at every save: said at INFO each time, a run's log filled with it. A part no checkpoint
    named (a run moved off the shards) is still said."""
    run = RunDirectory(tmp_path / "out", keep=2)
    run.acquire()
    try:
        with caplog.at_level(logging.DEBUG, logger="distconv.checkpoint"):
            for step in (10, 20, 30):
                _save(run, step, shards=2)
            assert _names(run.root) == {
                f"pserver-shard{s}-step{step}.safetensors" for s in (0, 1) for step in (20, 30)
            }
            assert not [r for r in caplog.records if r.levelno >= logging.INFO], caplog.text
            _part(run.root, 0, 5)  # of no checkpoint
            _save(run, 40, shards=2)
    finally:
        run.release()
    (said,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert said.endswith("which no checkpoint names: pserver-shard0-step5.safetensors"), said


def test_a_link_named_as_a_part_goes_not_its_file_and_a_folder_so_named_stays(tmp_path, caplog):
    """The sweep takes files and links (the link, never what it points at, dangling or not), as
    clearing does (:func:`distconv.run_files.shard_parts`): a folder named as a stale part is
    no part, and unlinking it would fail with a warning at every save."""
    run = RunDirectory(tmp_path / "out", keep=1)
    elsewhere = _part(tmp_path, 1, 5)  # the file a link named as shard 1's part points at
    run.acquire()
    try:
        (run.root / "pserver-shard0-step5.safetensors").mkdir()
        (run.root / "pserver-shard1-step5.safetensors").symlink_to(elsewhere)
        (run.root / "pserver-shard2-step5.safetensors").symlink_to(tmp_path / "gone")  # dangling
        with caplog.at_level(logging.DEBUG, logger="distconv.checkpoint"):
            _save(run, 10)
    finally:
        run.release()
    assert _names(run.root) == {
        "pserver-shard0-step5.safetensors",
        "pserver-shard0-step10.safetensors",
    }
    assert elsewhere.read_bytes() == b"part"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
