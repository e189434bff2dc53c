"""Checkpoints: round trip, atomic writes under failure and SIGKILL, clear errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import distconv.checkpoint as checkpoint_module
from distconv.checkpoint import (
    CheckpointError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from distconv.optim import Adam
from distconv.parameter import Parameter

REPO = Path(__file__).resolve().parents[1]


def _model(seed: int = 0) -> list[Parameter]:
    rng = np.random.default_rng(seed)
    return [
        Parameter("conv1.weight", rng.standard_normal((4, 1, 3, 3)).astype(np.float32)),
        Parameter("conv1.bias", rng.standard_normal(4).astype(np.float32)),
        Parameter("fc/1.weight", rng.standard_normal((3, 5)).astype(np.float32)),
        Parameter("scale", np.array(rng.standard_normal(), np.float32)),  # 0-d stays 0-d
    ]


def _adam_state(params, steps: int = 2):
    opt = Adam(lr=0.1)
    state = {p.name: opt.init_state(p.value) for p in params}
    for _ in range(steps):
        for p in params:
            opt.update(p.value, np.ones_like(p.value), state[p.name])
    return opt, state


def _save(path, params, state, **kw):
    kw.setdefault("step", 7)
    kw.setdefault("epoch", 2)
    save_checkpoint(path, params, state, seed=42, optimizer={"name": "adam", "lr": 0.1}, **kw)


def test_round_trip_restores_values_state_and_metadata(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    params = _model(0)
    _, state = _adam_state(params)
    _save(path, params, state, extra={"batch_size": 32})

    fresh = _model(1)
    _, fresh_state = _adam_state(fresh, steps=0)
    ids = [id(p.value) for p in fresh]
    ckpt = restore_checkpoint(path, fresh, fresh_state)

    for a, b in zip(params, fresh):
        np.testing.assert_array_equal(a.value, b.value)
    assert [id(p.value) for p in fresh] == ids  # copied in place: views elsewhere stay valid
    for name in state:
        for key in state[name]:
            np.testing.assert_array_equal(fresh_state[name][key], state[name][key])
    assert fresh_state["conv1.bias"]["step"].shape == ()
    assert int(fresh_state["conv1.bias"]["step"]) == 2
    assert (ckpt.step, ckpt.epoch, ckpt.seed) == (7, 2, 42)
    assert ckpt.optimizer == {"name": "adam", "lr": 0.1}
    assert ckpt.extra == {"batch_size": 32}


def test_file_is_plain_safetensors_with_prefixed_optimizer_state(tmp_path):
    from safetensors.numpy import load_file

    path = tmp_path / "c.safetensors"
    params = _model()
    _, state = _adam_state(params)
    _save(path, params, state)
    tensors = load_file(path)
    assert "optim/conv1.weight/m" in tensors and "optim/fc/1.weight/step" in tensors
    np.testing.assert_array_equal(tensors["conv1.bias"], params[1].value)
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_missing_file_names_it(tmp_path):
    with pytest.raises(CheckpointError, match=r"checkpoint .*nope.safetensors does not exist"):
        load_checkpoint(tmp_path / "nope.safetensors")


@pytest.mark.parametrize("keep", [0, 5, 100, -40])
def test_truncated_file_gives_a_clear_error(tmp_path, keep):
    path = tmp_path / "c.safetensors"
    _save(path, _model(), None)
    raw = path.read_bytes()
    path.write_bytes(raw[:keep] if keep >= 0 else raw[:keep])
    with pytest.raises(CheckpointError, match=r"c.safetensors is (unreadable|corrupt)"):
        load_checkpoint(path)


def test_flipped_data_byte_fails_the_checksum(tmp_path):
    path = tmp_path / "c.safetensors"
    _save(path, _model(), None)
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF  # inside the tensor data, where safetensors itself cannot notice
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="c.safetensors is corrupt: .*checksum"):
        load_checkpoint(path)


def test_garbage_and_foreign_safetensors(tmp_path):
    from safetensors.numpy import save_file

    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointError, match="garbage.safetensors is unreadable"):
        load_checkpoint(garbage)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": np.zeros(3, np.float32)}, foreign)
    with pytest.raises(CheckpointError, match="not a distconv one"):
        load_checkpoint(foreign)


def test_mismatched_model_lists_every_problem_and_changes_nothing(tmp_path):
    path = tmp_path / "c.safetensors"
    _save(path, _model(), None)
    other = [
        Parameter("conv1.weight", np.zeros((8, 1, 3, 3), np.float32)),  # wrong shape
        Parameter("conv2.weight", np.zeros((2, 2), np.float32)),  # not in the checkpoint
        Parameter("conv1.bias", np.zeros(4, np.float32)),  # fits
    ]
    with pytest.raises(CheckpointError) as info:
        restore_checkpoint(path, other)
    msg = str(info.value)
    assert "does not fit the model" in msg
    assert "parameter 'conv2.weight' is missing from the checkpoint" in msg
    assert "parameter 'fc/1.weight' is in the checkpoint but not in the model" in msg
    assert "'conv1.weight': model shape (8, 1, 3, 3), checkpoint shape (4, 1, 3, 3)" in msg
    assert not other[2].value.any()  # checked everything before writing anything


def test_optimizer_state_mismatch_is_reported(tmp_path):
    path = tmp_path / "c.safetensors"
    params = _model()
    _save(path, params, None)  # saved without optimizer state
    _, state = _adam_state(params, steps=0)
    with pytest.raises(CheckpointError, match="optimizer state 'conv1.bias/m' is missing"):
        restore_checkpoint(path, params, state)


def test_failed_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.safetensors"
    first = _model(0)
    _save(path, first, None, step=1)

    import safetensors.numpy

    def half_write_then_fail(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safetensors.numpy, "save_file", half_write_then_fail)
    with pytest.raises(OSError, match="No space left"):
        _save(path, _model(1), None, step=2)

    ckpt = load_checkpoint(path)
    assert ckpt.step == 1
    np.testing.assert_array_equal(ckpt.params["conv1.weight"], first[0].value)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.safetensors"]  # no temp file left


def test_stale_temp_files_are_removed_by_the_next_save(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    stale = tmp_path / ".checkpoint.safetensors.abc123.tmp"
    stale.write_bytes(b"left by a killed writer")
    unrelated = tmp_path / ".other.tmp"
    unrelated.write_bytes(b"")
    _save(path, _model(), None)
    assert not stale.exists() and unrelated.exists()


WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from distconv.checkpoint import save_checkpoint
    from distconv.parameter import Parameter

    path = sys.argv[1]
    params = [Parameter(f"w{i}", np.zeros(2_000_000, np.float32)) for i in range(4)]
    i = 0
    while True:
        i += 1
        for p in params:
            p.value[...] = i
        save_checkpoint(path, params, step=i)
        print(i, flush=True)
    """
)


def test_writer_killed_mid_write_leaves_a_whole_checkpoint(tmp_path):
    """SIGKILL a process that saves 32 MB checkpoints in a loop; the file on disk stays whole."""
    path = tmp_path / "checkpoint.safetensors"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "1"  # one whole save is on disk
        time.sleep(0.15)  # now the writer is somewhere inside a later save
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    ckpt = load_checkpoint(path)
    assert ckpt.step >= 1
    for a in ckpt.params.values():
        assert (a == ckpt.step).all()  # every tensor from the same save as the metadata


def test_metadata_is_json(tmp_path):
    from safetensors import safe_open

    path = tmp_path / "c.safetensors"
    _save(path, _model(), None)
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    assert json.loads(meta["optimizer"]) == {"name": "adam", "lr": 0.1}
    assert meta["format"] == checkpoint_module.FORMAT and meta["step"] == "7"


def test_name_clash_with_the_optimizer_prefix(tmp_path):
    with pytest.raises(CheckpointError, match="cannot save parameter 'optim/x'"):
        save_checkpoint(tmp_path / "c.safetensors", [Parameter("optim/x", np.zeros(1))])
