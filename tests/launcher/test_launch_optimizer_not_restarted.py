"""A launched parameter-server job whose optimizer the shards would not rebuild (a script's
subclass of Adam, which inherits Adam's name) is refused at rank 0's setup, and every attempt
would be refused alike (the same script, the same class): ``distconv-launch --max-restarts``
restarts none, and says why. Real launches of one worker and one shard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch

pytestmark = pytest.mark.timeout(120)

SCRIPT = Path(__file__).with_name("sign_adam.py")
PS_JOB = ("local", "--workers", "1", "--servers", "1", "--insecure", "--max-restarts", "2")


def test_an_optimizer_the_shards_would_not_rebuild_is_not_restarted(tmp_path):
    run = tmp_path / "run"
    done = launch(*PS_JOB, "--run-dir", str(run), "--", str(SCRIPT), cwd=tmp_path, timeout=100)
    said = done.stderr + done.stdout
    assert done.returncode == 1, said[-3000:]
    unused = (
        "not restarting (--max-restarts 2): optimizer __main__.SignAdam cannot run on the "
        "parameter server, which every attempt would refuse"
    )
    assert unused in done.stderr, said[-3000:]
    refused = "[worker 0] sign_adam.py: error: optimizer __main__.SignAdam cannot run on the "
    assert len([line for line in said.splitlines() if line.startswith(refused)]) == 1, said
    report = json.loads((run / "failure.json").read_text())
    assert report["restart"] == 0 and report["then"] == unused, report
