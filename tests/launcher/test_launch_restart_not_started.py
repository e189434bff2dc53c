"""A restart that cannot start still reports the failure that asked for it.

With ``--max-restarts``, attempt 0 failed, and attempt 1 could not open its child's log (the
logs folder replaced with a file between the attempts): the launcher ended on the ``cannot
start`` line alone, exit 1, with no ``failure.json`` for attempt 0's failure, which is what
the job died of. Now ``failure.json`` names that failure, and ``then`` the restart that could
not start and why; the launcher exits with the failure's status.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch

#: attempt 0 puts a file where the logs folder was, then fails: no log opens in attempt 1
BREAKS_LOGS = """\
import os, shutil, sys
if os.environ["DISTCONV_RESTART"] == "0":
    shutil.rmtree("run/logs")
    open("run/logs", "w").close()
    print("failing on purpose", flush=True)
sys.exit(3)
"""


@pytest.mark.timeout(60)
def test_a_restart_that_cannot_start_leaves_the_failure_reported(tmp_path: Path):
    (tmp_path / "fails.py").write_text(BREAKS_LOGS)
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--max-restarts", "2",
        "--run-dir", "run", "--", "fails.py",
        cwd=tmp_path, timeout=50,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 0, 3)
    assert report["restart"] == 0 and report["tail"] == ["failing on purpose"]
    then = report["then"]
    assert then.startswith("restart 1 of 2 could not start: cannot start worker-0: its log "), then
    assert "not a directory" in then, then
    assert f"then {then}" in done.stderr and "Traceback" not in done.stderr
