"""The weights alone (fine-tuning: ``restore_checkpoint(path, params)``, as docs/architecture.md
says) load from a file whose step or epoch is no count, as an older distconv saved -1: 5773e9ee
made load_checkpoint refuse such a file as damaged for every caller, the weights' too, though
only a run that goes on from the step needs it to be a count. Restoring the optimizer state,
and a resume, still refuse it."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import (
    CheckpointDamaged,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from tests.test_checkpoint_metadata_counts import _rewritten

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=[("step", "-1"), ("epoch", "-1"), ("step", str(2**63))], ids=str)
def old_file(tmp_path, request):
    """A checkpoint of ``w`` (twos) with Adam's state whose step or epoch is no count."""
    path = tmp_path / "c.safetensors"
    w = Parameter("w", np.full(3, 2.0))
    optimizer = create_optimizer("adam", lr=0.1)
    save_checkpoint(path, [w], {"w": optimizer.init_state(w.value)}, step=3, epoch=1)
    key, text = request.param
    _rewritten(path, **{key: text})
    return path, key, int(text)


def test_its_weights_load_for_fine_tuning(old_file):
    path, key, value = old_file
    w = Parameter("w", np.zeros(3))
    ckpt = restore_checkpoint(path, [w])
    np.testing.assert_array_equal(w.value, np.full(3, 2.0))
    assert getattr(ckpt, key) == value  # as the file holds it, not made up


def test_its_optimizer_state_and_a_plain_load_still_refuse_it(old_file):
    path, key, _ = old_file
    w = Parameter("w", np.zeros(3))
    state = {"w": create_optimizer("adam", lr=0.1).init_state(w.value)}
    with pytest.raises(CheckpointDamaged, match=rf"bad metadata: .*{key} .*not a count"):
        restore_checkpoint(path, [w], state)
    np.testing.assert_array_equal(w.value, np.zeros(3))  # untouched
    with pytest.raises(CheckpointDamaged, match=rf"{key} .*not a count"):
        load_checkpoint(path)


@pytest.mark.parametrize("damage", ["a flipped byte", "step 'abc'"])
def test_the_weights_alone_of_a_damaged_file_are_still_refused(tmp_path, damage):
    """Lenient about the position only: the digest and the metadata's integers are still
    checked where the weights alone are restored, and the model is left untouched."""
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, [Parameter("w", np.full(3, 2.0))], step=3, epoch=1)
    if damage == "a flipped byte":
        data = bytearray(path.read_bytes())
        data[-1] ^= 1  # the last weight's last byte: the digest no longer matches
        path.write_bytes(bytes(data))
    else:
        _rewritten(path, step="abc")
    w = Parameter("w", np.zeros(3))
    with pytest.raises(CheckpointDamaged, match="fails its checksum|bad metadata: .*'abc'"):
        restore_checkpoint(path, [w])
    np.testing.assert_array_equal(w.value, np.zeros(3))
