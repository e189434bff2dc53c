"""A shard refuses to write a checkpoint part whose optimizer counts (Adam's ``step``) hold
what is no count, naming the shard, the block and its parameter: such a part was written
without a word, and the count it held went on into the chief's checkpoint to be refused only
at the resume."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError
from distconv.optim import create_optimizer
from distconv.sync.ps.blocks import ParamSpec
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard
from distconv.sync.ps.state import _Block, _Refused

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def shard(tmp_path):
    """Shard 1, not bound, holding two blocks of parameter ``w`` with Adam's state."""
    shard = Shard(
        ShardConfig(
            bind="127.0.0.1:0",
            insecure=True,
            shard=1,
            num_shards=2,
            checkpoint_dir=str(tmp_path / "p"),
        )
    )
    shard.optimizer = create_optimizer("adam")
    shard.params = [ParamSpec("w", (4,), "float32")]
    for bid, start in ((3, 0), (4, 2)):
        value = np.ones((2, 1), np.float32)
        shard.blocks[bid] = _Block(0, start, start + 2, value, shard.optimizer.init_state(value))
        shard.blocks[bid].state["step"][...] = 7
    try:
        yield shard
    finally:
        shard.close()


def test_a_part_of_whole_counts_is_written(shard, tmp_path):
    from safetensors.numpy import load_file

    assert load_file(shard.save_part("5"))["block.4.state.step"] == 7


@pytest.mark.parametrize("count", [-1, np.iinfo(np.int64).min], ids=["-1", "int64 min"])
def test_a_count_that_is_no_count_is_refused_naming_the_shard_and_nothing_written(
    shard, tmp_path, count
):
    shard.blocks[4].state["step"][...] = count
    with pytest.raises(_Refused, match=rf"shard 1 .*block 4 of 'w'.* step: holds {count}, not a"):
        shard.save_requested_part(5, keep=None)
    with pytest.raises(CheckpointError, match=r"steplast.*shard 1 .*block 4 of 'w'"):
        shard.save_part("last")
    assert not (tmp_path / "p").exists()


def test_the_refusal_keeps_the_parts_before(shard, tmp_path):
    before = shard.save_part("5").read_bytes()
    shard.blocks[3].state["step"][...] = -2
    with pytest.raises(_Refused, match=r"block 3 of 'w'"):
        shard.save_requested_part(6, keep=1)  # step 6 written would have pruned step 5
    assert [p.name for p in (tmp_path / "p").iterdir()] == ["pserver-shard1-step5.safetensors"]
    assert (tmp_path / "p" / "pserver-shard1-step5.safetensors").read_bytes() == before
