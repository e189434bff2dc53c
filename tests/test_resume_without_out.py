"""``--resume auto`` or ``--overwrite`` with no ``--out`` (a script's or an API run's, with no
output directory) saves nothing, so a launcher's restart starts the run over: it is said once,
on the chief, where ``resume=True`` without one is refused."""

from __future__ import annotations

import subprocess

import pytest

from tests.test_examples_result import _example

pytestmark = pytest.mark.timeout(60)
SAID = "without an output directory (out_dir, --out) saves nothing"


@pytest.mark.parametrize("resume", [["--resume", "auto"], ["--overwrite"]])
def test_a_resume_flag_without_out_is_warned_of_once(tmp_path, resume):
    proc = _example(
        "mixed_regression.py", "--epochs", "1", *resume, cwd=tmp_path, stdout=subprocess.PIPE
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("test loss "), proc.stdout  # it trains, as before
    (line,) = [line for line in proc.stderr.splitlines() if SAID in line]
    assert f"({' '.join(resume)})" in line and "--max-restarts" in line, line
    assert list(tmp_path.iterdir()) == []  # nothing was written: what the warning says


def test_no_warning_where_there_is_an_out_or_no_resume_flag(tmp_path):
    for args in (["--out", "run", "--resume", "auto"], []):
        proc = _example("mixed_regression.py", "--epochs", "1", *args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert SAID not in proc.stderr, proc.stderr
