"""docs/operations.md lists ``failure.json``'s fields: the list is the report's keys. ``cause``
(what mpiexec's last lines say of a rank's signal, commit 4efecd4) was written but not listed.
A real failed launch writes the report read here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_path

REPO_ROOT = Path(__file__).resolve().parents[2]
FAILS = "import sys; print('failing on purpose', flush=True); sys.exit(3)\n"


def _documented_fields() -> set[str]:
    """The fields the list under "`failure.json` holds the same:" names: each item's names
    before its first ": " (what the fields hold follows it)."""
    text = (REPO_ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    start = text.index("`failure.json` holds the same:")
    block = text[start : text.index("\n\n", text.index("\n- ", start))]
    items = " ".join(block.split("\n")[1:]).split("- ")[1:]
    return {name for item in items for name in re.findall(r"`([a-z_]+)`", item.split(": ")[0])}


@pytest.mark.timeout(120)
def test_failure_json_fields_are_the_ones_documented(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(FAILS)
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "local", "--workers", "1", "--servers", "0",
         "--run-dir", str(tmp_path / "run"), "--", str(script)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert report["cause"] is None and report["exit_code"] == 3
    assert _documented_fields() == set(report)
