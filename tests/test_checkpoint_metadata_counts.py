"""load_checkpoint refuses a step or epoch in a file's metadata that is no count: a distconv
before save_checkpoint checked them saved ``int(step)`` of -1 as "-1", and a resume went on
from step -1 (or epoch -1), digest intact."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import (
    DIGEST_KEY,
    CheckpointDamaged,
    load_checkpoint,
    save_checkpoint,
    save_tensors,
)
from distconv.parameter import Parameter

pytestmark = pytest.mark.timeout(30)


def _rewritten(path, **meta: str) -> None:
    """Checkpoint ``path`` written again with metadata ``meta`` changed, its digest intact."""
    from safetensors import safe_open
    from safetensors.numpy import load_file

    with safe_open(str(path), "np") as f:
        metadata = {k: v for k, v in f.metadata().items() if k != DIGEST_KEY}
    save_tensors(path, load_file(path), {**metadata, **meta})


@pytest.mark.parametrize("key", ["step", "epoch"])
@pytest.mark.parametrize("text", ["-1", str(2**63)])
def test_a_count_that_is_no_count_in_the_metadata_is_damage(tmp_path, key, text):
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], step=3, epoch=1)
    _rewritten(path, **{key: text})
    with pytest.raises(CheckpointDamaged, match=rf"bad metadata: .*{key} '{text}'.*not a count"):
        load_checkpoint(path)


def test_counts_of_int64_range_are_read(tmp_path):
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], step=2**63 - 1, epoch=0)
    ckpt = load_checkpoint(path)
    assert (ckpt.step, ckpt.epoch) == (2**63 - 1, 0)
