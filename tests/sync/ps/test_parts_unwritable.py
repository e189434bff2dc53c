"""A shard whose disk cannot take its checkpoint part (full, a quota, a file in the way) no
longer stops the job: the part is the shards' extra copy, never read back, yet its refusal
failed the chief's checkpoint of that step (exit 1), and the chief's own checkpoint, the one a
resume reads, was not written either.

Real ``distconv train`` runs against two real shards on 127.0.0.1, each writing its parts in
a folder of its own. Shard 1's folder cannot take a part: a file put in its place once the
shard has started (which fails for root too), or a 4 KiB tmpfs mounted on it, a full disk as
the shard meets it (where this user may make a mount namespace). The same run with both folders
writable is the reference. The run goes on: the chief writes every checkpoint, its manifests
list shard 0's parts alone, both logs warn naming the part, the cause and that it is only the
shards' copy, and the weights end bit-identical, step by step, to the reference's.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ps_helpers import parts_job
from safetensors.numpy import load_file

from tests.mounts import needs_mounts

pytestmark = pytest.mark.timeout(180)

#: one epoch of Adam, a checkpoint every 2 steps: shard 1's part fails at each of them
TRAIN = ["--data", "synthetic", "--batch-size", "64", "--epochs", "1", "--no-progress",
         "--optimizer", "adam", "--checkpoint-every", "2", "--keep-checkpoints", "100"]  # fmt: skip

#: ``unshare -rm sh -c FULL FOLDER ARGV``: ARGV run with a 4 KiB tmpfs on FOLDER, in a mount
#: namespace of its own (a part is larger)
FULL = 'mount -t tmpfs -o size=4k distconv-test "$0" && exec "$@"'


def _train(tmp_path: Path, blocked: str | None) -> tuple[subprocess.CompletedProcess, str]:
    """:func:`parts_job`, ``blocked`` saying how shard 1 cannot take a part (``"file"`` in its
    folder's place, ``"full"``), or None."""

    def file_in_its_place(parts: Path) -> None:
        (parts / "s1").rmdir()
        (parts / "s1").write_text("")

    full = ["unshare", "-rm", "sh", "-c", FULL, str(tmp_path / "parts" / "s1")]
    wrapper = full if blocked == "full" else []
    after = file_in_its_place if blocked == "file" else None
    return parts_job(tmp_path, TRAIN, wrapper, after)


def _checkpoints(out: Path) -> dict[str, dict[str, np.ndarray]]:
    """Each step folder's chief part, by folder name."""
    folders = sorted(d for d in out.glob("step-*") if d.is_dir())
    return {d.name: load_file(d / "chief.safetensors") for d in folders}


@pytest.mark.parametrize("blocked", ["file", pytest.param("full", marks=needs_mounts)])
def test_a_part_the_disk_cannot_take_is_warned_of_and_the_run_goes_on(tmp_path, blocked):
    written, _ = _train(tmp_path / "written", None)
    assert written.returncode == 0, written.stderr[-2000:]
    done, shards_log = _train(tmp_path / "blocked", blocked)
    assert done.returncode == 0, done.stderr[-2000:]

    out = tmp_path / "blocked" / "out" / "checkpoints"
    steps = _checkpoints(out)
    reference = _checkpoints(tmp_path / "written" / "out" / "checkpoints")
    assert len(steps) >= 3 and list(steps) == list(reference), (list(steps), list(reference))
    for name, tensors in reference.items():  # the same training, step by step
        assert tensors.keys() == steps[name].keys()
        for key, value in tensors.items():
            np.testing.assert_array_equal(steps[name][key], value, err_msg=f"{name} {key}")
    for name in steps:  # shard 0's part listed, shard 1's none
        manifest = json.loads((out / f"{name}.json").read_text())
        assert list(manifest["remote"]) == ["pserver-shard0"], manifest

    part = tmp_path / "blocked" / "parts" / "s1" / "pserver-shard1-step2.safetensors"
    why = "no space left on device" if blocked == "full" else f"{part.parent} is a file"
    cause = f"cannot save checkpoint {part}: {why}"
    copy = "this part is only the shards' extra copy of the checkpoint, never read back"
    # said once, at the first checkpoint: every later one fails alike (part_failures)
    chief = [line for line in done.stderr.splitlines() if "wrote no part" in line]
    warned = [int(re.search(r"checkpoint (\d+):", line)[1]) for line in chief]
    assert warned == [int(min(steps).removeprefix("step-"))], done.stderr[-2000:]
    assert cause in chief[0] and "pserver shard 1 (" in chief[0] and copy in chief[0], chief[0]
    assert "--checkpoint-dir writes no parts" in chief[0], chief[0]
    shard = [line for line in shards_log.splitlines() if f"shard 1: {cause}" in line]
    assert len(shard) == 1 and copy in shard[0], shards_log[-2000:]
    assert shards_log.count("shard 1: cannot save checkpoint") <= 2  # and steplast's, at the end
    assert "Traceback" not in shards_log
