"""A named pipe or a device given where a checkpoint file belongs: ``load_checkpoint`` (and so
``restore_checkpoint``) opened it, and a pipe without a writer held the caller for ever. It is
refused at once, naming what it is and the file to pass, and nothing is written."""

from __future__ import annotations

import os

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError, restore_checkpoint
from distconv.checkpoint_errors import CheckpointReadError
from distconv.models import lenet

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
