"""Checkpoints that cannot be read here (a directory, no permission, no ml_dtypes, no memory) are
read errors naming the cause, not damage: the file is left as it is."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError, CheckpointReadError, load_checkpoint
from distconv.parameter import Parameter
from tests.checkpoint_model import save_small, small_model


# -- unreadable files: the real cause ----------------------------------------------------------
def test_a_directory_in_place_of_the_checkpoint(tmp_path):
    (tmp_path / "c.safetensors").mkdir()
    with pytest.raises(CheckpointError, match=r"c.safetensors is a directory, not a file"):
        load_checkpoint(tmp_path / "c.safetensors")


def test_permission_denied_is_reported_as_such(tmp_path, monkeypatch):
    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None)
    real_read_bytes = Path.read_bytes

    def denied(self):  # tests run as root, who may read anything: inject the OS's answer
        if self == path:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(CheckpointReadError) as info:  # not damage: the content may be fine
        load_checkpoint(path)
    assert str(info.value) == (
        f"checkpoint {path} cannot be read: permission denied; the file is left as it is, "
        "retry once it can be read"
    )


# -- what this host lacks is not damage --------------------------------------------------------
def test_a_bfloat16_checkpoint_without_ml_dtypes_is_a_read_error_naming_it(tmp_path, monkeypatch):
    """Read without ml_dtypes, a bfloat16 checkpoint was 'truncated or corrupt', which a resume
    sets aside for an older checkpoint: every newer one lost once ml_dtypes is back."""
    bfloat16 = pytest.importorskip("ml_dtypes").bfloat16
    path = tmp_path / "c.safetensors"
    save_small(path, [Parameter("w", np.ones(3, bfloat16))], None)
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes raises ImportError
    with pytest.raises(CheckpointReadError) as info:
        load_checkpoint(path)
    assert str(info.value) == (
        f"checkpoint {path} cannot be read here: its BF16 tensors need the ml_dtypes package; "
        "the file is left as it is"
    )


def test_running_out_of_memory_while_reading_is_a_read_error(tmp_path, monkeypatch):
    import safetensors.numpy

    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None)

    def no_memory(raw):
        raise MemoryError

    monkeypatch.setattr(safetensors.numpy, "load", no_memory)
    with pytest.raises(CheckpointReadError, match=r"cannot be read here: MemoryError; the file"):
        load_checkpoint(path)


def test_running_out_of_memory_reading_the_file_is_a_read_error(tmp_path, monkeypatch):
    """The whole file is read into memory before safetensors parses it: a MemoryError there
    left load_checkpoint as a bare MemoryError, not the one-line read error of a parse that
    runs out of memory."""
    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None)

    def no_memory(self):
        raise MemoryError

    monkeypatch.setattr(Path, "read_bytes", no_memory)
    with pytest.raises(CheckpointReadError) as info:
        load_checkpoint(path)
    assert str(info.value) == (
        f"checkpoint {path} cannot be read here: MemoryError; the file is left as it is"
    )


def test_running_out_of_memory_checking_the_digest_is_a_read_error(tmp_path, monkeypatch):
    """The checksum copies each tensor (``tobytes``): out of memory there, as in the parse."""
    import distconv.checkpoint_load as checkpoint_load  # the read side's digest

    path = tmp_path / "c.safetensors"
    save_small(path, small_model(), None)

    def no_memory(tensors, meta):
        raise MemoryError

    monkeypatch.setattr(checkpoint_load, "_digest", no_memory)
    with pytest.raises(CheckpointReadError, match=r"cannot be read here: MemoryError; the file"):
        load_checkpoint(path)
