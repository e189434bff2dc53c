"""The allocator policy: freed memory stays mapped, so the next step's arrays take no faults.

Each case runs in its own interpreter, because the setting is process-wide and must not leak
into the test process.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_path

REPO_ROOT = Path(__file__).resolve().parents[1]

# Allocate, touch and free a 3 MB array twice; count the page faults of the second time. Under
# numpy's 4 MiB huge-page threshold, and with transparent huge pages off for the process (a
# host with THP "always" would fault 2 MiB at a time), every 4 kB page faults on its own.
PROBE = """
import ctypes, json, resource
ctypes.CDLL(None).prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE
import numpy as np
from distconv.allocator import keep_freed_memory, keeps_freed_memory

before = keeps_freed_memory()
kept = keep_freed_memory()
assert keeps_freed_memory() is kept and before is False, (before, kept)
a = np.ones(375_000); del a
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
a = np.ones(375_000); del a
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"kept": kept, "faults": faults}))
"""


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without anything that tunes or replaces malloc, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", "LD_PRELOAD")
    }
    return {**env, "PYTHONPATH": child_path(), **extra}


def _probe(**env: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=_clean_env(**env), capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


glibc_only = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="the policy is glibc's mallopt"
)


@glibc_only
def test_freed_memory_is_reused_without_faults():
    kept, default = _probe(DISTCONV_KEEP_MEMORY="1"), _probe(DISTCONV_KEEP_MEMORY="0")
    assert kept["kept"] is True and default["kept"] is False
    pages = 3_000_000 // 4096
    # glibc's default gives the first 3 MB back and faults the second one in page by page
    assert default["faults"] > pages // 2
    assert kept["faults"] < pages // 50


@glibc_only
@pytest.mark.parametrize(
    "tuning",
    [{"MALLOC_TRIM_THRESHOLD_": "0"}, {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}],
)
def test_a_user_tuned_allocator_is_left_alone(tuning):
    # the user's setting (trim everything) stands, and the second 3 MB faults in again
    probe = _probe(DISTCONV_KEEP_MEMORY="1", **tuning)
    assert probe["kept"] is False
    assert probe["faults"] > 3_000_000 // 4096 // 2


def test_bad_setting_is_refused_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "distconv", "train", "--epochs", "1", "--out", str(tmp_path)],
        env=_clean_env(DISTCONV_KEEP_MEMORY="yes"), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "DISTCONV_KEEP_MEMORY must be 0 or 1, got 'yes'" in done.stderr
    assert "Traceback" not in done.stderr
