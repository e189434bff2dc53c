"""A script's ``init()`` refuses local sync on a rank of several in a script's words: it was
told "use --sync pserver or mpi", a flag it has none of (``sync=`` is its setting), after the
command line took its own refusal."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.timeout(60)

SCRIPT = """
import sys
import distconv.distributed as dist
sync = sys.argv[1] or None
dist.run_main(lambda: dist.init("sgd", sync=sync, flags={"rank": 1, "world_size": 2}))
"""


@pytest.mark.parametrize("sync", ["local", ""], ids=["asked", "picked"])
def test_local_sync_on_a_rank_of_two_is_refused_in_a_script_s_words(tmp_path, sync):
    env = child_env()
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "DISTCONV_PSERVERS", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, sync],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert proc.returncode == 1, proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, proc.stderr
    assert "rank 1 of 2 (flags), but local sync trains alone; use sync='pserver' or 'mpi'" in line
    assert "or leave sync out and init() picks it" in line, line
