"""``examples/sparse_table.py`` takes ``--accumulate`` and ``--dtype`` as ``distconv train``
does: a researcher's large global batch through accumulation, and a check in float64, were
refused as ``unrecognized arguments``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors import safe_open

from tests.child_env import child_path

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(120)


def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"}
    for name in ("RANK", "WORLD_SIZE", "DISTCONV_PSERVERS"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, *argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=100
    )


def _flag_help(argv: list[str], cwd: Path) -> list[str]:
    """The ``--accumulate`` and ``--dtype`` entries of ``argv --help``, as one line each."""
    said = " ".join(_run(*argv, "--help", cwd=cwd).stdout.split())
    return [re.search(rf"\[{flag} [^\]]*\]", said)[0] for flag in ("--accumulate", "--dtype")]


def test_the_example_takes_them_as_distconv_train_does(tmp_path):
    example = str(REPO / "examples" / "sparse_table.py")
    assert _flag_help([example], tmp_path) == _flag_help(["-m", "distconv", "train"], tmp_path)
    done = _run(example, "--epochs", "1", "--examples", "512", "--accumulate", "2",
                "--dtype", "float64", "--out", "run", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(global batch 128)" in done.stderr, done.stderr  # 64 a pass x 2 passes
    (part,) = (tmp_path / "run" / "checkpoints").glob("step-*/chief.safetensors")
    with safe_open(str(part), "np") as f:
        assert f.get_tensor("mix.proj0.weight").dtype == "float64"
