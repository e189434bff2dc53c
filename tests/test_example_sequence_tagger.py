"""``examples/sequence_tagger.py``, run as a user runs it: the Trainer learns to tag ragged
sentences (empty ones among them), its metrics counted in tokens."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_path

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(60)
def test_the_tagger_example_learns_its_tags(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "sequence_tagger.py"), "--epochs", "3"]
        + ["--out", str(out)],
        env={**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [50, 100, 150]  # 800 sentences, 16 a step
    assert records[0]["global_batch"] == 16  # sentences
    # an epoch's examples are the training set's tokens, not its 800 sentences
    spec = importlib.util.spec_from_file_location(
        "tagger", REPO / "examples" / "sequence_tagger.py"
    )
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    tokens = int(example.make_data(800, seed=1).seq_starts[-1])
    assert tokens > 1000
    for r in records:
        assert r["examples_per_second"] * r["seconds"] == pytest.approx(tokens, rel=1e-9)
    assert records[-1]["test_acc"] > 0.95  # per token; chance is a third
    assert records[-1]["train_loss"] < 0.2 * records[0]["train_loss"]
    assert f"test loss {records[-1]['test_loss']:.5f}" in proc.stdout
