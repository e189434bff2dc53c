"""A first checkpoint cut short leaves no run behind it.

docs/operations.md: a first run stopped at once (SIGKILL, a second Ctrl-C) in its first epoch,
which leaves an empty ``metrics.jsonl`` and no checkpoint, does not count, and the same command
starts afresh. A second Ctrl-C during the checkpoint the first one asked for left that step's
directory (made before the part is written, removed only on a ``CheckpointError``), and
``holds_run`` counted any entry of ``checkpoints/`` as a run: the same command was refused with
"already holds a run". The interrupt now removes the directory as a full disk does, and a step
directory no manifest names, holding only the chief's part (whole or cut short), is no run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.resume import Position, StepCheckpoints
from distconv.run_dir import RunDirectory
from distconv.sync.local import LocalSync
from tests.child_env import child_path


class CutAtShards(LocalSync):
    """A sync whose shards' save is where the second Ctrl-C lands: the chief's part is on disk,
    no manifest yet."""

    def save_remote_parts(self, step, keep):
        raise KeyboardInterrupt


def _checkpoints(root):
    params = [Parameter("w", np.linspace(0.0, 1.0, 8))]
    sync = CutAtShards(create_optimizer("sgd", lr=0.1))
    sync.setup(params)
    ckpts = StepCheckpoints(RunDirectory(root, keep=2), params, sync, {"seed": 0})
    ckpts.open(False)
    return ckpts


def test_a_checkpoint_interrupted_before_its_manifest_leaves_no_step_directory(tmp_path):
    ckpts = _checkpoints(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        ckpts.save(Position(0, 169, 169), {})
    assert list((tmp_path / "checkpoints").iterdir()) == []
    assert not RunDirectory(tmp_path).holds_run()


def _unnamed_step(root, *names):
    """A step directory no manifest names, holding ``names`` (empty files)."""
    step = root / "checkpoints" / "step-00000169"
    step.mkdir(parents=True)
    for name in names:
        (step / name).write_bytes(b"")
    (root / "metrics.jsonl").write_bytes(b"")  # what a run leaves before its first epoch's end
    return step


@pytest.mark.parametrize(
    "names",
    [(), ("chief.safetensors",), (".chief.safetensors.x1y2.tmp",)],
    ids=["empty", "whole part", "part cut short"],
)
def test_a_step_directory_no_manifest_names_holding_only_the_chiefs_part_is_no_run(tmp_path, names):
    """What SIGKILL leaves in a first epoch's checkpoint: an empty step directory, the chief's
    part written whole or cut short, and no manifest."""
    _unnamed_step(tmp_path, *names)
    assert not RunDirectory(tmp_path).holds_run()


def test_a_step_directory_a_manifest_names_or_holding_other_files_is_a_run(tmp_path):
    step = _unnamed_step(tmp_path, "chief.safetensors", "notes.txt")
    assert RunDirectory(tmp_path).holds_run()  # not ours to ignore
    (step / "notes.txt").unlink()
    (step.parent / "step-00000169.json").write_text("{}")  # a manifest: a checkpoint
    assert RunDirectory(tmp_path).holds_run()
    (step.parent / "step-00000169.json").unlink()
    (step.parent / "other").mkdir()
    assert RunDirectory(tmp_path).holds_run()


#: the first start SIGKILLs itself while writing its first checkpoint's manifest: its chief's
#: part whole, the manifest's temporary file on disk, not yet renamed
KILL_IN_MANIFEST = """
import os, signal
if os.environ.get("KILL_IN_MANIFEST") == "1":
    from distconv import files
    def die(path):
        if path.name.startswith("step-") and path.name.endswith(".json"):
            os.kill(os.getpid(), signal.SIGKILL)
    files.write_hook = die
"""


@pytest.mark.timeout(120)
def test_a_train_killed_while_writing_its_first_manifest_leaves_no_run(tmp_path):
    """``distconv train --checkpoint-every 5`` SIGKILLed inside its first checkpoint's manifest
    write leaves ``.step-00000005.json.<random>.tmp`` beside the step directory: no manifest
    (a scan reads none), so no checkpoint, and the same command starts afresh."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(KILL_IN_MANIFEST)
    out = tmp_path / "run"
    train = ("--data", "synthetic", "--epochs", "1", "--batch-size", "16", "--no-progress")
    argv = [sys.executable, "-m", "distconv", "train", *train, "--checkpoint-every", "5"]
    argv += ["--out", str(out)]
    env = {**os.environ, "PYTHONPATH": child_path(inject), "OMP_NUM_THREADS": "1"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_RESTART", "DISTCONV_LAUNCH"):
        env.pop(name, None)
    run = dict(cwd=tmp_path, capture_output=True, text=True, timeout=100)
    killed = subprocess.run(argv, env={**env, "KILL_IN_MANIFEST": "1"}, **run)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert left[1:] == ["step-00000005"] and left[0].startswith(".step-00000005.json."), left
    again = subprocess.run(argv, env=env, **run)
    assert again.returncode == 0, again.stderr
    assert RunDirectory(out).latest().step == 24  # 384 synthetic examples / 16, afresh
