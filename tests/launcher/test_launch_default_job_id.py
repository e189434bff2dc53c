"""The job id a launch picks without ``--job-id``: its time and 32 random bits.

With 16 bits (``launch-<time>-d8bc``), launches started in the same second collided with a
chance of about n²/131072 (7% for 100 at once), and the second was refused on its run
directory's lock: that sweep point never ran.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch

DEFAULT_JOB_ID = re.compile(r"launch-\d{8}-\d{6}-[0-9a-f]{8}")


@pytest.mark.timeout(60)
def test_a_launch_without_a_job_id_names_its_run_directory_with_32_random_bits(tmp_path: Path):
    done = launch("local", "--workers", "1", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert DEFAULT_JOB_ID.fullmatch(run_dir.name), run_dir.name
    assert f"job {run_dir.name}:" in done.stderr
