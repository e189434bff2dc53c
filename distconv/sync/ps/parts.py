"""A shard's checkpoint part: its blocks, their optimizer state and the table, in one file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


class CheckpointParts:
    """The checkpoint side of :class:`~distconv.sync.ps.server.Shard`."""

    def save_part(self, step: str) -> Path:
        """Write this shard's blocks and optimizer state atomically; returns the file."""
        from distconv.checkpoint import save_tensors

        tensors = {}
        for bid, b in self.blocks.items():
            tensors[f"block.{bid}.value"] = b.value
            for k, a in b.state.items():
                tensors[f"block.{bid}.state.{k}"] = np.array(a, order="C")
        meta = {
            "shard": str(self.index),
            "step": step,
            "params": json.dumps([p.to_wire() for p in self.params]),
            "table": json.dumps(
                [[bid, b.param, b.start, b.stop] for bid, b in self.blocks.items()]
            ),
            "optimizer": json.dumps(self.optimizer.config() if self.optimizer else {}),
            "completed": json.dumps(self.completed),
        }
        directory = Path(self.config.checkpoint_dir)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"pserver-shard{self.index}-step{step}.safetensors"
        save_tensors(path, tensors, meta)
        return path
