"""The training-step benchmark's distconv side runs through the sync contract: it broke
silently when LocalSync began refusing a step started inside another (7bc47da), because no
test ran it."""

from __future__ import annotations

import argparse
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


@pytest.mark.timeout(30)
def test_a_negative_torch_backward_is_noise_with_no_ratio(capsys):
    """PyTorch's backward is its forward+backward minus its forward: one stall in the forward's
    median made fc2's negative, which was printed as 0.00 and gave the row a ratio of 0.00."""
    bench = _load_benchmark()
    parts = [f"{name} {half}" for name in bench.LAYERS for half in ("fwd", "bwd")]
    ours = {**dict.fromkeys(parts, 0.5), "optimizer": 0.5, "step": 8.0, "overhead": 0.4}
    torch = {**dict.fromkeys(parts, 0.25), "optimizer": 0.5, "step": 8.0}
    torch.update({"fc2 fwd": 31.68, "fc2 bwd": -31.6})
    args = argparse.Namespace(threads=1, clock="wall", rounds=1, repeat=3, keep_memory="distconv")
    bench._report({"digits 8x8 b16": {"distconv": ours, "torch": torch}}, args)
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines() if line}
    assert rows["fc2"] == ["fc2", "0.50", "0.50", "31.68", "n/a", "(noise)", "-"]
    assert rows["fc1"] == ["fc1", "0.50", "0.50", "0.25", "0.25", "2.00"]  # the rest as before
