"""The training-step benchmark's distconv side runs through the sync contract: it broke
silently when LocalSync began refusing a step started inside another (7bc47da), because no
test ran it."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "train_step.py"


def _load_benchmark():
    spec = importlib.util.spec_from_file_location("train_step_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(120)
def test_the_distconv_side_times_every_part_of_a_step():
    result = _load_benchmark()._distconv_worker(8, 4, 2)
    for part in ("step", "overhead", "optimizer", "conv1 fwd", "conv1 bwd"):
        assert math.isfinite(result[part]) and result[part] >= 0, (part, result[part])
    assert result["step"] > 0 and result["optimizer"] > 0
