"""An optimizer's configuration is the user's, and is said as such.

``dist.init("adam", lr=-1)`` under ``run_main`` ended in a 20-line traceback where the README
promises a configuration error in one line; ``distconv train --optimizer ADAM`` was refused
while ``create_optimizer`` and a script's ``--optimizer`` take any case. Real processes.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.timeout(60)

BAD_LR_SCRIPT = """\
from distconv.distributed import init, run_main


def main():
    init("adam", lr=-1)


run_main(main)
"""


def _run(argv, cwd) -> subprocess.CompletedProcess:
    env = child_env()
    for name in ("DISTCONV_DEBUG", "DISTCONV_PSERVERS", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=50
    )


def test_a_hyperparameter_refused_at_init_is_one_line_under_run_main(tmp_path):
    (tmp_path / "bad_lr.py").write_text(BAD_LR_SCRIPT)
    done = _run(["bad_lr.py"], tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        "bad_lr.py: error: optimizer 'adam': lr must satisfy 0.0 < lr, got -1"
    ], done.stderr


def test_distconv_train_takes_an_optimizer_name_in_any_case(tmp_path):
    argv = ["-m", "distconv", "train", "--data", "synthetic", "--epochs", "1"]
    done = _run([*argv, "--optimizer", "ADAM", "--out", str(tmp_path / "run")], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Adam(lr=0.001" in done.stderr + done.stdout
