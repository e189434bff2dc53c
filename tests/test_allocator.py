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

REPO_ROOT = Path(__file__).resolve().parents[1]

# Allocate, touch and free a 3 MB array twice; count the page faults of the second time (under
# numpy's 4 MiB huge-page threshold, so every 4 kB page faults on its own).
PROBE = """
import json, resource
import numpy as np
from distconv.allocator import keep_freed_memory

kept = keep_freed_memory()
a = np.ones(375_000); del a
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
a = np.ones(375_000); del a
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"kept": kept, "faults": faults}))
"""


def _probe(keep: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "DISTCONV_KEEP_MEMORY": keep}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the policy is glibc's mallopt")
def test_freed_memory_is_reused_without_faults():
    kept, default = _probe("1"), _probe("0")
    assert kept["kept"] is True and default["kept"] is False
    pages = 3_000_000 // 4096
    # glibc's default gives the first 3 MB back and faults the second one in page by page
    assert default["faults"] > pages // 2
    assert kept["faults"] < pages // 50


def test_bad_setting_is_refused(monkeypatch):
    from distconv import allocator

    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.setenv("DISTCONV_KEEP_MEMORY", "yes")
    with pytest.raises(ValueError, match="DISTCONV_KEEP_MEMORY must be 0 or 1"):
        allocator.keep_freed_memory()
