"""``distconv-launch local --insecure`` with a script of the user's.

The launcher passed ``--insecure`` to its shards and to ``distconv train`` only: a script that
builds its sync from the environment (``distconv.distributed.init``, as
examples/mixed_regression.py) got no keys and no word that the shards run without CURVE, and
every worker stopped with ``--sync pserver needs the job's CURVE keys ... or --insecure``
although the operator had passed ``--insecure``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.commands import JobEnv, child_env
from tests.launcher.launch_cli import REPO_ROOT, launch

EXAMPLE = REPO_ROOT / "examples" / "mixed_regression.py"


@pytest.mark.timeout(180)
def test_a_script_trains_against_insecure_shards(tmp_path: Path):
    run = tmp_path / "run"
    done = launch(
        "local", "--workers", "2", "--servers", "1", "--insecure", "--run-dir", str(run),
        "--grace", "20", "--", str(EXAMPLE), "--epochs", "1",
        cwd=tmp_path, timeout=170,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    assert "[worker 0] test loss" in done.stdout, done.stdout[-3000:]
    assert not (run / "keys").exists()  # no CURVE keys were made


@pytest.mark.timeout(60)
def test_only_an_insecure_job_tells_its_children_so():
    shell = {"PATH": "/bin", "DISTCONV_INSECURE": "1"}  # left over in the launching shell
    assert child_env(shell, JobEnv("j", insecure=True), "worker", 0, 1)["DISTCONV_INSECURE"] == "1"
    assert "DISTCONV_INSECURE" not in child_env(shell, JobEnv("j", keys_dir="/k"), "worker", 0, 1)
