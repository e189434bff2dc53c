"""A child's log that cannot be written (a full disk) neither hangs the job nor loses its lines
(k198).

The thread copying a child's output died on the log's ENOSPC with a traceback; nothing read
the child's pipe after that, so a child that went on printing blocked on its next write for
good: the job hung, and its lines reached neither the log nor the launcher's output.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch

#: more than a pipe holds (64 KiB), so a child whose pipe nobody reads blocks
PRINTS = "import sys\nfor i in range(3000): print('line', i, 'x' * 60)\nsys.exit(3)\n"


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_under_the_log_keeps_the_lines_flowing(tmp_path: Path):
    script, run = tmp_path / "prints.py", tmp_path / "run"
    script.write_text(PRINTS)
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "worker-0.log").symlink_to("/dev/full")  # every write: ENOSPC
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--run-dir", str(run), "--", str(script),
        cwd=tmp_path, timeout=30,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr  # the child's own status: it ran to its end
    assert done.stdout.count("[worker 0] line ") == 3000
    assert "Traceback" not in done.stderr
    said = f"cannot write '{run / 'logs' / 'worker-0.log'}': no space left on device; worker-0's"
    assert said in done.stderr
    assert "worker 0 failed with exit code 3" in done.stderr
    assert "line 2999 " in done.stderr  # the report's tail still has the last lines


@pytest.mark.timeout(60)
def test_a_report_that_cannot_be_written_is_still_said(tmp_path: Path):
    """failure.json on a full disk: the failure was lost, the launcher said only the write's
    error and exited 1, not the child's status (k198)."""
    run = tmp_path / "run"
    (run / "failure.json.tmp").mkdir(parents=True)  # the report's write fails (EISDIR)
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--run-dir", str(run), "--",
        "sh", "-c", "echo dying; exit 3",
        cwd=tmp_path, timeout=30,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "worker 0 failed with exit code 3 (after 0 restart(s)); last lines of" in done.stderr
    assert "    dying\n" in done.stderr
    assert f"report not written: '{run / 'failure.json.tmp'}': is a directory" in done.stderr
    assert "error:" not in done.stderr
