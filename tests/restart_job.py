"""The small job the restart tests train: a LeNet on 8x8 digits-like data, whose start
(job id, launch, restart) each test chooses."""

from __future__ import annotations

import json
from pathlib import Path

from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.resume import JobStart
from distconv.sync import create_sync
from distconv.trainer import Trainer


def small_trainer(out_dir: Path, **job) -> Trainer:
    set_seed(0)
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.01))
    return Trainer(net, sync, 16, out_dir=out_dir, progress=False, start=JobStart(**job))


def epochs_written(out_dir: Path) -> list[int]:
    return [json.loads(line)["epoch"] for line in (out_dir / "metrics.jsonl").open()]
