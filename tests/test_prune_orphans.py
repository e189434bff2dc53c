"""A prune killed between deleting an old checkpoint's manifest and its directory left the
directory, which no later prune saw: a whole checkpoint's bytes for good (review k163). The
kill is real (SIGKILL at that point of a real ``distconv train``); the resumed run sweeps the
orphan and keeps what is still named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: SIGKILL this process when the prune goes to delete an old checkpoint's directory
KILL_IN_PRUNE = """
import os, signal
if os.environ.get("KILL_IN_PRUNE"):
    import distconv.run_dir as run_dir
    def rmtree(path, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    run_dir.shutil.rmtree = rmtree
"""


def _train(tmp_path: Path, out: Path, *extra: str, kill: bool = False):
    inject = tmp_path / "inject"
    inject.mkdir(exist_ok=True)
    (inject / "sitecustomize.py").write_text(KILL_IN_PRUNE)
    env = {**os.environ, "PYTHONPATH": f"{inject}{os.pathsep}{REPO}"}
    env.pop("KILL_IN_PRUNE", None)
    if kill:
        env["KILL_IN_PRUNE"] = "1"
    argv = ["train", "--data", "synthetic", "--epochs", "2", "--checkpoint-every", "4",
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
    done = _train(tmp_path, out, kill=True)
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


#: an old manifest that cannot be deleted (EACCES, EROFS; root passes every permission here)
REFUSE_MANIFEST_UNLINK = """
import os, pathlib
if os.environ.get("REFUSE_MANIFEST_UNLINK"):
    unlink = pathlib.Path.unlink
    def refused(self, *args, **kwargs):
        if self.name.startswith("step-") and self.suffix == ".json":
            raise PermissionError(13, "Permission denied", str(self))
        return unlink(self, *args, **kwargs)
    pathlib.Path.unlink = refused
"""


@pytest.mark.timeout(120)
def test_an_old_checkpoint_that_cannot_be_deleted_is_a_warning_not_the_runs_end(tmp_path):
    """The prune after a save raised its unlink's error out of the save: a run whose new
    checkpoint was whole died at it (review k172). It warns, trains on, and ends."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(REFUSE_MANIFEST_UNLINK)
    env = {**os.environ, "PYTHONPATH": f"{inject}{os.pathsep}{REPO}", "REFUSE_MANIFEST_UNLINK": "1"}
    out = tmp_path / "run"
    argv = ["train", "--data", "synthetic", "--epochs", "1", "--checkpoint-every", "4",
            "--keep-checkpoints", "1", "--no-progress", "--out", str(out)]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "distconv", *argv],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "not pruning old checkpoints now" in done.stderr and "Permission denied" in done.stderr
    manifests = sorted(p.name for p in (out / "checkpoints").glob("step-*.json"))
    assert len(manifests) > 1 and manifests[0] == "step-00000004.json", manifests


#: the oldest manifest alone cannot be deleted (another owner's file in a sticky directory)
REFUSE_OLDEST_UNLINK = """
import os, pathlib
if os.environ.get("REFUSE_OLDEST_UNLINK"):
    unlink = pathlib.Path.unlink
    def refused(self, *args, **kwargs):
        if self.name == "step-00000004.json":
            raise PermissionError(1, "Operation not permitted", str(self))
        return unlink(self, *args, **kwargs)
    pathlib.Path.unlink = refused
"""


@pytest.mark.timeout(120)
def test_an_old_checkpoint_that_cannot_be_deleted_does_not_keep_the_newer_ones(tmp_path):
    """The prune stopped at the first manifest it could not delete, the oldest, and skipped
    the orphan sweep too: one that could never go kept every later checkpoint for good, though
    the warning said a later save prunes (review k176 of 60ef37b). The others go."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(REFUSE_OLDEST_UNLINK)
    env = {**os.environ, "PYTHONPATH": f"{inject}{os.pathsep}{REPO}", "REFUSE_OLDEST_UNLINK": "1"}
    out = tmp_path / "run"
    argv = ["train", "--data", "synthetic", "--epochs", "1", "--checkpoint-every", "4",
            "--keep-checkpoints", "1", "--no-progress", "--out", str(out)]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "distconv", *argv],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "not pruning old checkpoints now" in done.stderr, done.stderr
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert len(names) == 4 and names[:2] == ["step-00000004", "step-00000004.json"], names
