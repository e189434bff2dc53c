"""A checkpoint's bytes are a function of what it holds: safetensors 0.8 writes the metadata map
in a Rust HashMap's order, random per process (safetensors issue #584), so two runs of one code
and seed wrote files that differed in their header while tensors and digest agreed: no diff or
hash of checkpoints (reproducibility checks, caches) could match them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import load_checkpoint
from tests.child_env import child_path

REPO = Path(__file__).resolve().parents[1]

#: ``save(path)``: one checkpoint of fixed tensors and metadata, in a process or in this one
SAVE = """
import sys
import numpy as np
from distconv.checkpoint import save_checkpoint
from distconv.parameter import Parameter
def save(path):
    params = [Parameter(n, np.arange(12.0).reshape(3, 4) * k) for k, n in enumerate("wbzac")]
    state = {p.name: {"m": p.value + 1, "step": np.int64(7)} for p in params}
    save_checkpoint(path, params, state, step=7, epoch=2, seed=3,
                    optimizer={"name": "adam", "lr": 0.01}, extra={"b": 1, "a": "\\u00e9"})
"""


def _run(*argv: str, cwd: Path, hash_seed: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": child_path(), "PYTHONHASHSEED": hash_seed}
    env.pop("DISTCONV_DEBUG", None)
    return subprocess.Popen([sys.executable, *argv], cwd=cwd, env=env, stderr=subprocess.PIPE)


def _wait(*procs: subprocess.Popen) -> None:
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()


def _metadata_keys(raw: bytes) -> list[str]:
    n = int.from_bytes(raw[:8], "little")
    return list(json.loads(raw[8 : 8 + n])["__metadata__"])


@pytest.mark.timeout(60)
def test_one_checkpoint_saved_by_two_processes_is_the_same_bytes(tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    _wait(
        _run("-c", SAVE + "save(sys.argv[1])", str(a), cwd=tmp_path, hash_seed="1"),
        _run("-c", SAVE + "save(sys.argv[1])", str(b), cwd=tmp_path, hash_seed="2"),
    )
    raw = a.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == hashlib.sha256(b.read_bytes()).hexdigest()
    assert _metadata_keys(raw) == sorted(_metadata_keys(raw))
    assert (
        8 + int.from_bytes(raw[:8], "little")
    ) % 8 == 0  # the data aligned, as safetensors has it
    ckpt = load_checkpoint(a)  # its digest checks too
    assert (ckpt.step, ckpt.epoch, ckpt.seed, ckpt.extra) == (7, 2, 3, {"b": 1, "a": "\u00e9"})
    np.testing.assert_array_equal(ckpt.params["z"], np.arange(12.0).reshape(3, 4) * 2)
    assert ckpt.optim_state["c"]["step"] == 7


@pytest.mark.timeout(60)
def test_a_checkpoint_with_its_header_rewritten_is_read_by_safetensors_and_torch(tmp_path):
    """safetensors' own readers take the header distconv writes (padded with spaces)."""
    from safetensors import safe_open
    from safetensors.numpy import load_file

    path, saving = tmp_path / "c.safetensors", {}
    exec(SAVE, saving)
    saving["save"](path)
    tensors = load_file(path)
    np.testing.assert_array_equal(tensors["optim/a/m"], np.arange(12.0).reshape(3, 4) * 3 + 1)
    with safe_open(path, "numpy") as f:
        meta = f.metadata()
    assert meta["step"] == "7" and json.loads(meta["extra"]) == {"b": 1, "a": "\u00e9"}
    torch = pytest.importorskip("safetensors.torch")
    assert torch.load_file(path)["w"].tolist() == [[0.0] * 4] * 3


@pytest.mark.timeout(60)
def test_two_training_runs_of_one_seed_write_the_same_checkpoint_bytes(tmp_path):
    """No timestamp or host is in a checkpoint (its metadata: step, epoch, seed, optimizer,
    the run's arguments and data digest), so the whole file repeats, and its manifest."""
    args = ["-m", "distconv", "train", "--data", "synthetic", "--batch-size", "32"]
    args += ["--no-progress", "--epochs", "1", "--seed", "5"]
    _wait(*(_run(*args, "--out", str(tmp_path / o), cwd=tmp_path, hash_seed=o) for o in "12"))
    step = Path("checkpoints", "step-00000012")
    for part in (step / "chief.safetensors", step.with_suffix(".json")):
        assert (tmp_path / "1" / part).read_bytes() == (tmp_path / "2" / part).read_bytes()
