"""A launched fine-tuning script whose ``load_weights(PATH, params)`` is refused at its start
(weights that do not fit the model, nothing at PATH) meets the same refusal on every attempt:
``distconv-launch --max-restarts`` restarts none of them, and says why, naming the call, as it
does for ``distconv train --init-from`` (tests/launcher/test_init_from_restarts.py). Real
launches of one worker running a real script under ``run_main``."""

from __future__ import annotations

import json

import pytest

from distconv.checkpoint import save_checkpoint
from distconv.models import lenet
from tests.launcher.launch_cli import launch

pytestmark = pytest.mark.timeout(120)

#: a fine-tuning script: a 10-class LeNet loading the weights its first argument names
SCRIPT = """\
import sys

from distconv.distributed import run_main
from distconv.init_from import load_weights
from distconv.models import lenet


def main():
    load_weights(sys.argv[1], lenet((1, 8, 8), 10).parameters())


run_main(main)
"""
LOCAL_1 = ("local", "--workers", "1", "--servers", "0", "--max-restarts", "2")
WORKER_0 = "[worker 0] fine.py: error: load_weights "


@pytest.mark.parametrize(
    ("given", "refusal", "words"),
    [
        (
            "four.safetensors",
            "the load_weights checkpoint does not fit the model",
            "its weights do not fit this model (first difference: 'fc2.weight'",
        ),
        ("nothing", "the load_weights path holds no checkpoint", ": no such file or folder"),
    ],
    ids=["weights that do not fit", "nothing at the path"],
)
def test_a_script_s_refused_load_is_not_restarted(tmp_path, given, refusal, words):
    (tmp_path / "fine.py").write_text(SCRIPT)
    # a 4-class run's weights: they load only into a 4-class LeNet
    save_checkpoint(tmp_path / "four.safetensors", lenet((1, 8, 8), 4).parameters())
    run = tmp_path / "run"
    done = launch(*LOCAL_1, "--run-dir", str(run), "--", "fine.py", given, cwd=tmp_path)
    said = done.stderr + done.stdout
    assert done.returncode == 1, said[-3000:]
    unused = f"not restarting (--max-restarts 2): {refusal}, which every attempt would refuse"
    assert unused in done.stderr, said[-3000:]
    refused = [line for line in said.splitlines() if line.startswith(WORKER_0)]
    assert len(refused) == 1 and words in refused[0], said[-3000:]  # one attempt, no restart
    report = json.loads((run / "failure.json").read_text())
    assert report["restart"] == 0 and report["then"] == unused, report
