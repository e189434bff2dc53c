"""A prune killed between deleting an old checkpoint's manifest and its directory left the
directory, which no later prune saw: a whole checkpoint's bytes for good. The
kill is real (SIGKILL at that point of a real ``distconv train``); the resumed run sweeps the
orphan and keeps what is still named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_path

REPO = Path(__file__).resolve().parents[1]

#: faults injected in a real run: SIGKILL when the prune goes to delete an old checkpoint's
#: directory (KILL_IN_PRUNE), or an unlink refused (REFUSE_UNLINK)
INJECT = """
import os, signal
if os.environ.get("KILL_IN_PRUNE"):
    import distconv.run_dir as run_dir
    def rmtree(path, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    run_dir.shutil.rmtree = rmtree
# an old manifest that cannot be deleted (EACCES, EROFS, another owner's file in a sticky
# directory; root passes every permission here): those whose names match REFUSE_UNLINK
if os.environ.get("REFUSE_UNLINK"):
    import pathlib, re
    unlink = pathlib.Path.unlink
    def refused(self, *args, **kwargs):
        if re.fullmatch(os.environ["REFUSE_UNLINK"], self.name):
            raise PermissionError(13, "Permission denied", str(self))
        return unlink(self, *args, **kwargs)
    pathlib.Path.unlink = refused
"""


def _train(tmp_path: Path, out: Path, *extra: str, epochs: int = 2, **faults: str):
    """``distconv train`` on synthetic data, a checkpoint every 4 steps, the newest kept;
    ``faults``: INJECT's switches (KILL_IN_PRUNE, REFUSE_UNLINK) set in its environment."""
    inject = tmp_path / "inject"
    inject.mkdir(exist_ok=True)
    (inject / "sitecustomize.py").write_text(INJECT)
    env = {k: v for k, v in os.environ.items() if k not in ("KILL_IN_PRUNE", "REFUSE_UNLINK")}
    env.update(PYTHONPATH=child_path(inject), **faults)
    argv = ["train", "--data", "synthetic", "--epochs", str(epochs), "--checkpoint-every", "4",
            "--keep-checkpoints", "1", "--no-progress", "--out", str(out), *extra]  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "distconv", *argv],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=100,
    )  # fmt: skip


def _names(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "checkpoints").iterdir())


@pytest.mark.timeout(240)
def test_a_directory_a_killed_prune_left_is_swept_by_a_later_one(tmp_path):
    out = tmp_path / "run"
    done = _train(tmp_path, out, KILL_IN_PRUNE="1")
    assert done.returncode == -9, done.stderr
    assert _names(out) == ["step-00000004", "step-00000008", "step-00000008.json"]
    aside = out / "checkpoints" / "step-00000002"  # set aside once: named, kept for inspection
    aside.mkdir()
    (aside.parent / "step-00000002.json.unusable").write_text("{}")
    done = _train(tmp_path, out, "--resume")
    assert done.returncode == 0, done.stderr
    names = _names(out)
    assert "step-00000004" not in names
    assert {"step-00000002", "step-00000002.json.unusable"} <= set(names)
    assert [n for n in names if n.endswith(".json")] == [f"{names[-2]}.json"]


@pytest.mark.timeout(120)
def test_an_old_checkpoint_that_cannot_be_deleted_is_a_warning_not_the_runs_end(tmp_path):
    """The prune after a save raised its unlink's error out of the save: a run whose new
    checkpoint was whole died at it. It warns, trains on, and ends."""
    out = tmp_path / "run"
    done = _train(tmp_path, out, epochs=1, REFUSE_UNLINK=r"step-\d+\.json")
    assert done.returncode == 0, done.stderr
    assert "not pruning old checkpoints now" in done.stderr and "Permission denied" in done.stderr
    manifests = sorted(p.name for p in (out / "checkpoints").glob("step-*.json"))
    assert len(manifests) > 1 and manifests[0] == "step-00000004.json", manifests


@pytest.mark.timeout(120)
def test_an_old_checkpoint_that_cannot_be_deleted_does_not_keep_the_newer_ones(tmp_path):
    """The prune stopped at the first manifest it could not delete, the oldest, and skipped
    the orphan sweep too: one that could never go kept every later checkpoint for good, though
    the warning said a later save prunes. The others go."""
    out = tmp_path / "run"
    done = _train(tmp_path, out, epochs=1, REFUSE_UNLINK=r"step-00000004\.json")
    assert done.returncode == 0, done.stderr
    assert "not pruning old checkpoints now" in done.stderr, done.stderr
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert len(names) == 4 and names[:2] == ["step-00000004", "step-00000004.json"], names


@pytest.mark.timeout(30)
def test_a_listing_that_fails_in_the_prune_is_a_warning(tmp_path, monkeypatch, caplog):
    """An OSError listing the checkpoints (EIO; pathlib passes over a PermissionError alone)
    leaves the save's whole checkpoint committed, with a warning: a later save prunes (c069fb2,
    which came without a test)."""
    import errno
    import logging
    import pathlib

    from distconv.run_dir import CHIEF, RunDirectory

    glob = pathlib.Path.glob

    def failing(self, pattern, *args, **kwargs):
        if pattern == "step-*.json":
            raise OSError(errno.EIO, "Input/output error", str(self))
        return glob(self, pattern, *args, **kwargs)

    run = RunDirectory(tmp_path / "out", keep=1)
    parts = {step: run.step_dir(step) / "chief.safetensors" for step in (4, 8)}
    for part in parts.values():
        part.write_bytes(b"x")
    run.commit(4, {CHIEF: parts[4]})
    monkeypatch.setattr(pathlib.Path, "glob", failing)  # the listing fails from here on
    with caplog.at_level(logging.WARNING):
        manifest = run.commit(8, {CHIEF: parts[8]})
    monkeypatch.undo()
    assert manifest.step == 8 and manifest.path.is_file()
    assert any("not pruning old checkpoints now" in r.getMessage() for r in caplog.records)
    assert [m.step for m in run.manifests()] == [4, 8]  # nothing pruned: the next save will


@pytest.mark.timeout(30)
def test_a_step_saved_again_after_its_set_aside_is_swept_when_a_killed_prune_orphans_it(tmp_path):
    """A step directory beside a manifest set aside was kept for good, as if that manifest
    named it; since the set-aside moves its directory to ``step-N.unusable``, the
    ``step-N`` beside it is the step saved again, and once a prune killed between its manifest
    and its directory orphaned it, no later sweep took it: a whole checkpoint's bytes.
    The set-aside files stay."""
    from distconv.run_dir import CHIEF, RunDirectory

    run = RunDirectory(tmp_path / "out", keep=1)

    def save(step: int, data: bytes = b"whole") -> None:
        part = run.step_dir(step) / "chief.safetensors"
        part.write_bytes(data)
        run.commit(step, {CHIEF: part})

    save(2, b"damaged")
    run.set_aside(run.latest())
    save(2)  # the resumed run saves step 2 again
    (run.checkpoint_root / "step-00000002.json").unlink()  # a prune killed before its rmtree
    save(4)
    assert _names(tmp_path / "out") == [
        "step-00000002.json.unusable",
        "step-00000002.unusable",
        "step-00000004",
        "step-00000004.json",
    ]
    aside = run.checkpoint_root / "step-00000002.unusable" / "chief.safetensors"
    assert aside.read_bytes() == b"damaged"
