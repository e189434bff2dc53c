"""An optimizer's configuration is the user's, and is said as such.

``distconv train --optimizer ADAM`` was refused while ``create_optimizer`` and a script's
``--optimizer`` take any case. Real processes.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.timeout(60)


def _run(argv, cwd) -> subprocess.CompletedProcess:
    env = child_env()
    for name in ("DISTCONV_DEBUG", "DISTCONV_PSERVERS", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=50
    )


def test_distconv_train_takes_an_optimizer_name_in_any_case(tmp_path):
    argv = ["-m", "distconv", "train", "--data", "synthetic", "--epochs", "1"]
    done = _run([*argv, "--optimizer", "ADAM", "--out", str(tmp_path / "run")], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Adam(lr=0.001" in done.stderr + done.stdout
