"""benchmarks/network_build.py refuses a ``--baseline`` that holds no distconv, before timing: its
worker imported this checkout's distconv instead, and a mistyped path printed a ratio of about
1.0, as if the other checkout built networks as fast as this one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "network_build.py"


def test_a_then_with_no_distconv_is_refused_naming_the_path(tmp_path):
    missing = tmp_path / "no-checkout"
    ran = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "4", "--baseline", str(missing)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 2, (ran.stdout, ran.stderr)
    assert f"--baseline {missing}: no distconv package there" in ran.stderr, ran.stderr
    assert "then / this" not in ran.stdout, ran.stdout
