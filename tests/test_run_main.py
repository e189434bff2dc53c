"""``distconv.distributed.run_main`` in a script of its own, as a user runs one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """\
import sys
import distconv.distributed as dist
from distconv.sync.peers import PeerFailed


def main():
    if sys.argv[1] == "peer":
        raise PeerFailed("rank 1 failed", [1])
    return int(sys.argv[1])


sys.exit(dist.run_main(main))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("arg", "status"), [("0", 0), ("3", 3), ("peer", 75)])
def test_run_main_keeps_mains_exit_status(tmp_path, arg, status):
    """run_main returned None whatever ``main`` returned: ``sys.exit(main())`` turned into
    ``sys.exit(dist.run_main(main))`` exited 0 where ``main`` said 3."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script), arg], env=env, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == status, done.stderr[-2000:]
    assert ("PeerFailed: rank 1 failed" in done.stderr) == (arg == "peer")  # the traceback
