"""Damaged checkpoints: truncated, flipped or foreign bytes fail with a one-line error and never
load with a changed meaning."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distconv.checkpoint import CheckpointDamaged, CheckpointError, load_checkpoint
from tests.checkpoint_model import adam_state, save_small, small_model


def _same(a, b) -> bool:
    """Whether two checkpoints mean the same: metadata, names, dtypes, shapes and values."""
    if (a.step, a.epoch, a.seed, a.optimizer, a.extra) != (
        b.step,
        b.epoch,
        b.seed,
        b.optimizer,
        b.extra,
    ):
        return False
    flat_a = {**a.params, **{f"{n}/{k}": v for n, s in a.optim_state.items() for k, v in s.items()}}
    flat_b = {**b.params, **{f"{n}/{k}": v for n, s in b.optim_state.items() for k, v in s.items()}}
    return flat_a.keys() == flat_b.keys() and all(
        flat_a[k].dtype == flat_b[k].dtype and np.array_equal(flat_a[k], flat_b[k]) for k in flat_a
    )


@pytest.mark.parametrize("keep", [0, 5, 100, -40])
def test_truncated_file_gives_a_clear_error(tmp_path, keep):
    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None)
    raw = path.read_bytes()
    path.write_bytes(raw[:keep] if keep >= 0 else raw[:keep])
    with pytest.raises(CheckpointDamaged, match=r"c.safetensors is (unreadable|corrupt)"):
        load_checkpoint(path)


def test_flipped_data_byte_fails_the_checksum(tmp_path):
    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None)
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF  # inside the tensor data, where safetensors itself cannot notice
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointDamaged, match="c.safetensors is corrupt: .*checksum"):
        load_checkpoint(path)


def test_garbage_and_foreign_safetensors(tmp_path):
    from safetensors.numpy import save_file

    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointDamaged, match="garbage.safetensors is unreadable"):
        load_checkpoint(garbage)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": np.zeros(3, np.float32)}, foreign)
    with pytest.raises(CheckpointDamaged, match="not a distconv one"):
        load_checkpoint(foreign)


# -- the digest covers the metadata -------------------------------------------------------------
def test_edited_epoch_in_the_header_fails_the_checksum(tmp_path):
    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None, epoch=1)
    raw = path.read_bytes()
    assert raw.count(b'"epoch":"1"') == 1
    path.write_bytes(raw.replace(b'"epoch":"1"', b'"epoch":"0"'))  # same length: still parses
    with pytest.raises(CheckpointError, match="c.safetensors is corrupt: it fails its checksum"):
        load_checkpoint(path)


def test_older_format_version_is_refused(tmp_path):
    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b'"version":"2"', b'"version":"1"'))
    with pytest.raises(CheckpointError, match="format version '1'; this distconv reads"):
        load_checkpoint(path)


@pytest.fixture(scope="module")
def original_bytes(tmp_path_factory):
    path = tmp_path_factory.mktemp("orig") / "c.safetensors"
    params = small_model(0)
    _, state = adam_state(params)
    save_small(path, params, state, extra={"batch_size": 32})
    return path.read_bytes(), load_checkpoint(path)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    flips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 255)), min_size=1, max_size=4)
)
def test_flipped_bytes_never_load_with_a_changed_meaning(original_bytes, tmp_path, flips):
    """Flip bytes anywhere (header length, JSON header, metadata, tensor data): the result loads
    exactly the original checkpoint or fails with a one-line CheckpointError."""
    raw, original = original_bytes
    damaged = bytearray(raw)
    for where, mask in flips:
        damaged[where % len(raw)] ^= mask
    path = tmp_path / "flipped.safetensors"
    path.write_bytes(bytes(damaged))
    try:
        loaded = load_checkpoint(path)
    except CheckpointError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    assert _same(loaded, original)


def test_every_single_bit_flip_in_the_header_fails_or_loads_the_original(original_bytes, tmp_path):
    """The header (length, tensor table, metadata) bit by bit: nothing loads with a new meaning."""
    raw, original = original_bytes
    header_end = 8 + int.from_bytes(raw[:8], "little")
    path = tmp_path / "flipped.safetensors"
    path.write_bytes(raw)
    outcomes = {"failed": 0, "same": 0}
    fd = os.open(path, os.O_WRONLY)  # flip in place: reopening with truncation is slow
    try:
        for where in range(header_end):
            for bit in range(8):
                os.pwrite(fd, bytes([raw[where] ^ (1 << bit)]), where)
                try:
                    loaded = load_checkpoint(path)
                except CheckpointError as exc:
                    assert "\n" not in str(exc)
                    outcomes["failed"] += 1
                    continue
                assert _same(loaded, original), f"byte {where} bit {bit} changed the meaning"
                outcomes["same"] += 1
            os.pwrite(fd, raw[where : where + 1], where)
    finally:
        os.close(fd)
    assert outcomes["failed"] > 0.9 * 8 * header_end
