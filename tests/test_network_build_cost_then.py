"""benchmarks/network_build.py refuses a ``--baseline`` that holds no distconv, before timing: its
worker imported this checkout's distconv instead, and a mistyped path printed a ratio of about
1.0, as if the other checkout built networks as fast as this one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "network_build.py"


@pytest.mark.parametrize("flag", ["--baseline", "--then"])  # --then: its old name, kept
def test_a_then_with_no_distconv_is_refused_naming_the_path(tmp_path, flag):
    missing = tmp_path / "no-checkout"
    ran = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "4", flag, str(missing)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 2, (ran.stdout, ran.stderr)
    assert f"--baseline {missing}: no distconv package there" in ran.stderr, ran.stderr
    assert "then / this" not in ran.stdout, ran.stdout


def test_conv_operators_refusal_names_the_flag_as_its_usage_does(tmp_path):
    """benchmarks/conv_operator.py said ``--then DIR: no distconv package there`` after its
    flag was renamed ``--baseline``: a flag its help no longer names first."""
    missing = tmp_path / "no-checkout"
    script = SCRIPT.with_name("conv_operator.py")
    ran = subprocess.run(
        [sys.executable, str(script), "--threads", "1", "--baseline", str(missing)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert f"--baseline {missing}: no distconv package there" in ran.stderr, ran.stderr
