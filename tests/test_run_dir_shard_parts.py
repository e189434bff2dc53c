"""``--overwrite`` deletes the previous run's parameter-server shard parts: under
``distconv-launch local`` the shards write ``pserver-shardI-stepS.safetensors`` (``steplast``
on stopping) at the top of ``--out``, and clearing the run left them there, the old run's
``...-steplast.safetensors`` read as the new run's. Nothing else there goes. Real files, and
a real run replaced through the Trainer."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from distconv.checkpoint import save_tensors
from distconv.data import split, synthetic
from distconv.run_dir import RunDirectory
from tests.restart_job import epochs_written, small_trainer

#: the parts of two shards of the run before, one write of a part cut short
PARTS = (
    "pserver-shard0-step15.safetensors",
    "pserver-shard0-steplast.safetensors",
    "pserver-shard1-step15.safetensors",
    ".pserver-shard0-step30.safetensors.k2x9q1.tmp",
)
#: the user's, beside them: kept, whatever their names hold
KEPT = (
    "notes.txt",
    "pserver-shard0-steplast.safetensors.bak",
    "my-pserver-shard0-step15.safetensors",
    "old/pserver-shard0-step15.safetensors",
)


def test_overwrite_deletes_the_shard_parts_and_nothing_else(tmp_path: Path):
    train, test = split(synthetic(n=160, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
    out, elsewhere = tmp_path / "run", tmp_path / "elsewhere.safetensors"
    small_trainer(out, job_id="j1").fit(train, test, epochs=1)
    for name in PARTS:
        save_tensors(out / name, {"block.0.value": np.arange(4, dtype=np.float32)}, {})
    for name in KEPT:
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_text(f"mine: {name}\n")
    elsewhere.write_text("a part kept on another disk\n")
    (out / "pserver-shard2-steplast.safetensors").symlink_to(elsewhere)  # the link goes
    history = small_trainer(out, job_id="j2").fit(train, test, epochs=1, resume="overwrite")
    assert [r["epoch"] for r in history] == [1] and epochs_written(out) == [1]
    assert RunDirectory(out).latest().job == "j2"
    assert not [p.name for p in out.iterdir() if "pserver-shard" in p.name and p.name not in KEPT]
    assert all((out / name).read_text() == f"mine: {name}\n" for name in KEPT)
    assert elsewhere.read_text() == "a part kept on another disk\n"
