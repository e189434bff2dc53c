"""A script's prints under ``distconv-launch mpi`` come as they are printed.

Into mpiexec's pipe Python buffers stdout by blocks (the launcher removes PYTHONUNBUFFERED,
which splits lines under MPI's rank prefix): a script's prints came only at its exit, and a
stopped job (SIGTERM ends Python without a flush) lost them, from the output and the log.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import job_env

SCRIPT = """
import time
for i in range(200):
    print("ready", i, "x" * 60)
time.sleep(120)
"""


def _stop(proc: subprocess.Popen) -> tuple[str, str]:
    """One SIGTERM, its output read to the end: it stops the ranks at once (under 1 s). A
    second one 0.5 s later, while the launcher was still alive, could land once it had given
    SIGTERM's default back at its very end, and killed it (-15) in place of its 143."""
    proc.send_signal(signal.SIGTERM)
    return proc.communicate(timeout=60)


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_scripts_lines_come_whole_before_it_exits_and_survive_a_stop(tmp_path: Path):
    mpiexec_or_skip()
    script, run = tmp_path / "ranks.py", tmp_path / "run"
    script.write_text(SCRIPT)
    log = run / "logs" / "mpiexec-0.log"
    # job_env: a launcher that hangs on its stop goes with mpiexec, its proxy and its ranks
    with job_env(ENV) as env:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "launcher", "mpi", "-np", "2", "--mpi-flavor", "mpich",
             "--run-dir", str(run), "--grace", "10", "--", str(script)],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:  # every rank's 200 lines, while the ranks sleep
                text = log.read_text() if log.exists() else ""
                if text.count("ready 199 ") == 2:
                    break
                time.sleep(0.2)
            else:
                pytest.fail(f"the ranks' lines did not come while they ran: {text[-500:]!r}")
        finally:
            try:
                out, err = _stop(launcher)
            finally:
                launcher.kill()  # where the stop hung past its communicate()
                launcher.wait()
    assert launcher.returncode == 128 + signal.SIGTERM, err
    lines = [line for line in out.splitlines() if "ready" in line]
    expected = {f"[{r}] ready {i} {'x' * 60}" for r in (0, 1) for i in range(200)}
    assert set(lines) == expected and len(lines) == 400, lines[:5]  # whole, each behind its rank
