"""benchmarks/layers.py, run for real: one case, one round, against this checkout as its own
baseline, and the flags that would time nothing refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.child_env import REPO_ROOT, child_env

SCRIPT = REPO_ROOT / "benchmarks" / "layers.py"


def _run(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *flags],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=400,  # the child that tries `import torch` may take a while
        cwd=REPO_ROOT,
    )


@pytest.mark.timeout(420)
def test_a_case_is_timed_against_the_baseline_and_the_row_says_both():
    case = "seqpool sum 32x20x128"
    done = _run("--rounds", "1", "--cases", case, "--baseline", str(REPO_ROOT))
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.strip().startswith(case))
    ours, base, vs_base = row.split()[3:6]
    assert float(ours) > 0 and float(base) > 0
    # both printed rounded: the ratio to 0.01, each time to 0.001 ms of about 0.1 ms (0.5 %)
    assert float(vs_base) == pytest.approx(float(ours) / float(base), abs=0.02)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "flags, said",
    [
        (["--rounds", "0"], "--rounds: must be at least 1, got 0"),
        (["--threads", "0"], "--threads: must be at least 1, got 0"),
        (["--baseline", "/nonexistent"], "--baseline /nonexistent holds no distconv/ package"),
    ],
)
def test_flags_that_would_time_nothing_or_nothing_older_are_refused(flags, said):
    done = _run(*flags)
    assert done.returncode == 2 and said in done.stderr
