"""A shard whose "last" part (written on its way out) is refused still logs its stats, and the
refusal still reaches its caller: the refusal raised out of ``serve`` before ``log_stats``, so
the shutdown's stats line, the only record of the shard's counters, was lost."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError
from distconv.optim import create_optimizer
from distconv.sync.ps.blocks import ParamSpec
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard
from distconv.sync.ps.state import _Block

pytestmark = pytest.mark.timeout(30)


def _shard_holding_a_block(index: int, checkpoint_dir: Path) -> Shard:
    """A bound shard ``index`` (of two) that holds one Adam block of a parameter ``w``."""
    shard = Shard(
        ShardConfig(
            bind="127.0.0.1:0", insecure=True, shard=index, num_shards=2,
            checkpoint_dir=str(checkpoint_dir),
        )
    )  # fmt: skip
    shard.bind()
    shard.optimizer = create_optimizer("adam")
    shard.params = [ParamSpec("w", (2,), "float32")]
    value = np.ones((2, 1), np.float32)
    shard.blocks[0] = _Block(0, 0, 2, value, shard.optimizer.init_state(value))
    return shard


def test_a_refused_last_part_raises_after_the_stats_are_logged(tmp_path, caplog):
    shard = _shard_holding_a_block(1, tmp_path)
    try:
        shard.blocks[0].state["step"][...] = -1  # a count that is no count: the part is refused
        shard.stop()  # serve returns at once, to its shutdown
        with caplog.at_level(logging.INFO, logger="distconv"):
            with pytest.raises(CheckpointError, match=r"steplast.*shard 1 "):
                shard.serve()
        assert any(r.getMessage().startswith("shard 1 stats ") for r in caplog.records)
        assert not list(tmp_path.iterdir())  # nothing of the refused part written
    finally:
        shard.close()


def test_a_last_part_the_disk_cannot_take_is_a_warning(tmp_path, caplog):
    """A shard stopping after a job that ended well, its ``steplast`` part refused by the disk
    (here a file where its folder goes; a full or read-only disk alike): the job's checkpoints
    hold all a resume needs, parts are never read back, yet the shard ended on an error line
    and a standalone shard exited 1. It is a warning now, and ``serve`` returns."""
    in_the_way = tmp_path / "parts"
    in_the_way.write_text("not a folder")
    shard = _shard_holding_a_block(0, in_the_way)
    try:
        shard.stop()
        with caplog.at_level(logging.INFO, logger="distconv"):
            shard.serve()
        (said,) = [
            r.getMessage()
            for r in caplog.records
            if r.levelno == logging.WARNING and "checkpoint" in r.getMessage()
        ]
        assert said.startswith(f"shard 0: cannot save checkpoint {in_the_way}/"), said
        assert said.endswith("a resume needs (a shard's parts are never read back)"), said
        assert any(r.getMessage().startswith("shard 0 stats ") for r in caplog.records)
        assert in_the_way.read_text() == "not a folder"
    finally:
        shard.close()
