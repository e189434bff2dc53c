"""The real ``distconv-launch`` as a subprocess, in an environment rid of another launcher's
rank variables: what the tests of the launcher's refusals and messages share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.processes import run_job

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_KEYS", "DISTCONV_PSERVERS"):
    ENV.pop(_name, None)


def launch(*argv: str, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    """``python -m launcher ARGV`` in ``cwd``, its output captured as text; where it hangs past
    ``timeout``, it and every process of its job are killed (:func:`tests.processes.run_job`)."""
    return run_job([sys.executable, "-m", "launcher", *argv], env=ENV, timeout=timeout, cwd=cwd)
