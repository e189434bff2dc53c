"""A named pipe or a device given where a checkpoint file belongs: ``load_checkpoint`` (and so
``restore_checkpoint``) opened it, and a pipe without a writer held the caller for ever. It is
refused at once, naming what it is and the file to pass, and nothing is written."""

from __future__ import annotations

import os

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError, restore_checkpoint
from distconv.checkpoint_errors import CheckpointReadError
from distconv.checkpoint_paths import checkpoint_file
from distconv.models import lenet
from distconv.refused_starts import init_from_refused_in
from distconv.source_words import EVALUATE_FROM, INIT_FROM_FLAG

pytestmark = pytest.mark.timeout(20)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "chief.safetensors"
    os.mkfifo(fifo)
    params = lenet((1, 8, 8), 4).parameters()
    before = [p.value.copy() for p in params]
    with pytest.raises(CheckpointReadError) as refused:
        restore_checkpoint(fifo, params)
    assert str(refused.value) == (
        f"checkpoint {fifo} is a named pipe (FIFO), not a checkpoint file: a checkpoint is "
        "read from a regular file; pass the checkpoint file "
        "RUN/checkpoints/step-N/chief.safetensors"
    )
    assert all(np.array_equal(b, p.value) for b, p in zip(before, params))


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_a_device_is_refused_as_one():
    with pytest.raises(CheckpointError, match=r"^checkpoint /dev/zero is a character device, "):
        restore_checkpoint("/dev/zero", lenet((1, 8, 8), 4).parameters())


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.parametrize("words", [INIT_FROM_FLAG, EVALUATE_FROM])
@pytest.mark.parametrize("given", ["chief.safetensors", "link.safetensors", "step-3.json"])
def test_a_named_pipe_is_no_missing_file_to_the_path_loaders(tmp_path, words, given):
    """``--init-from``, ``distconv evaluate --from`` and ``load_weights`` said "no such file or
    folder" of a pipe that ``ls`` shows (itself, a link to it, by a manifest's name): it is
    named for what it is, and the launcher still reads it as a start refused for good."""
    os.mkfifo(tmp_path / "chief.safetensors")
    os.mkfifo(tmp_path / "step-3.json")
    (tmp_path / "link.safetensors").symlink_to(tmp_path / "chief.safetensors")
    with pytest.raises(CheckpointError) as refused:
        checkpoint_file(tmp_path / given, words)
    said = str(refused.value)
    assert "no such file" not in said and "it is a named pipe (FIFO), not a file " in said
    assert said.startswith(f"{words.source(tmp_path / given)}: no complete checkpoint there ")
    if words is INIT_FROM_FLAG:
        line = f"distconv train: error: {said}"
        assert init_from_refused_in([line]) == "the --init-from path holds no checkpoint"


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null here")
def test_a_device_is_no_missing_file_to_init_from():
    with pytest.raises(CheckpointError, match=r"\(it is a character device, not a file or"):
        checkpoint_file("/dev/null")
