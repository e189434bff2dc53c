"""``kill -9`` of ``distconv-launch mpi`` stops the ranks as its SIGTERM would: they checkpoint
at an agreed stop step, end through ``MPI_Finalize`` or distconv's abort (no ``/dev/shm`` file
left), and their last lines reach ``mpiexec``'s log. Before, the first line a rank printed into
the dead launcher's pipe killed ``mpiexec`` by SIGPIPE, and Hydra SIGKILLed the ranks: their
segment left behind, and in 2 trials of 5 no stop checkpoint."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest

from distconv.stop_agreement import STOP_CHECK_EVERY
from tests.launcher.launch_cli import ENV, launcher_command, wait_while_running
from tests.launcher.real_children import mpiexec_or_skip
from tests.mpi.common import node_segments
from tests.processes import job_env, job_left, job_processes

#: what a rank says as it stops at the kernel's SIGTERM (its stop checkpoint's step after it)
STOPPED = re.compile(r"stopped by SIGTERM after step (\d+)")


def checkpoint_steps(run: Path) -> list[int]:
    """The steps of the run's complete checkpoints (their manifests), oldest first."""
    manifests = (run / "train" / "checkpoints").glob("step-*.json")
    return sorted(int(m.stem.removeprefix("step-")) for m in manifests)


def rank_segments(env: dict[str, str]) -> set[str]:
    """The MPICH shared-memory files the job's ranks map now (their ``/proc/PID/maps``),
    unlinked already (as MPI came up) or not."""
    ranks = [pid for pid, args in job_processes(env).items() if "-m distconv train" in args]
    return {path for pid in ranks for path in node_segments(f"/proc/{pid}/maps")}


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_ranks_of_a_killed_launcher_stop_at_a_checkpoint_and_leave_nothing(tmp_path):
    mpiexec_or_skip()
    run = tmp_path / "run"
    argv = ["mpi", "-n", "2", "--threads", "1", "--run-dir", str(run)]
    argv += ["--", "--epochs", "400", "--no-progress"]  # minutes: ends only by the kill
    with job_env(ENV) as env, open(tmp_path / "out", "wb") as out:
        launcher = subprocess.Popen(
            [*launcher_command(), *argv], env=env, cwd=tmp_path, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            # two epochs in: the ranks train, each has mapped the node's segment
            wait_while_running(lambda: len(checkpoint_steps(run)) >= 2, launcher, "epoch 2", 90)
            segments = rank_segments(env)
            before = checkpoint_steps(run)[-1]
            launcher.send_signal(signal.SIGKILL)
        finally:
            launcher.kill()  # no-op after the SIGKILL; one that failed before it must not run on
            launcher.wait(10)
        left = job_left(env, 60)  # Hydra, the ranks and the output's keeper all end
        assert left == {}, left
    assert segments, "the ranks mapped no shared-memory file: nothing was checked"
    assert sorted(path for path in segments if Path(path).exists()) == []
    log = (run / "logs" / "mpiexec-0.log").read_text(errors="replace")
    stops = {int(step) for step in STOPPED.findall(log)}
    assert len(stops) == 1, log[-3000:]  # both ranks, at the one step they agreed on
    stop = stops.pop()
    assert stop > before and stop % STOP_CHECK_EVERY == 0, (stop, before)
    assert checkpoint_steps(run)[-1] == stop, checkpoint_steps(run)
    assert len(STOPPED.findall(log)) == 2, log[-3000:]
