"""``distconv-launch mpi -np 2 -- --timeout 0.001``: a timeout that short runs out at setup,
between ranks that are well. The stop said "waited 0.0 s in Allgatherv (setup) for a rank that
has not joined it: a rank is stuck, or died without MPI noticing", blaming a peer, with the
setting last, in a parenthesis; it leads with the setting now, and says what to give."""

from __future__ import annotations

import time

import pytest

from distconv.sync.mpi.watchdog import Watchdog
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip

#: how the stop begins where the timeout is below the least (the words, not imported)
TOO_SHORT = "--timeout 0.001 s (or MPISync's timeout=) is too short for MPI"


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_timeout_too_short_for_any_setup_is_named_first_by_a_real_mpi_job(tmp_path):
    mpiexec_or_skip()
    train = ["--data", "synthetic", "--epochs", "1", "--no-progress", "--timeout", "0.001"]
    run_dir = str(tmp_path / "run")
    done = launch(
        "mpi", "-np", "2", "--threads", "1", "--run-dir", run_dir, "--", *train,
        cwd=tmp_path, timeout=100,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    headline = next(line for line in done.stderr.splitlines() if "failed with" in line)
    assert f"ended the job: SyncError: {TOO_SHORT}" in headline, headline
    # not "give --timeout 0.2 or more": such a job stopped at close at 0.2 s and 1 s too, rank 0
    # writing its last checkpoint, in the words of a stall
    assert "while rank 0 writes a checkpoint; give one longer than those waits" in headline
    assert "0.2 or more" not in headline, headline
    assert "has not joined" not in done.stderr and "is stuck" not in done.stderr, done.stderr


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("timeout", "leads"), [(0.001, True), (0.2, False)])
def test_the_stop_leads_with_the_setting_only_below_the_least(timeout, leads):
    """Below 0.2 s (a parameter-server shard's least too) the setting is the cause; from it
    on, a stop is a stall's, in the stall's words."""
    stopped: list[str] = []
    watchdog = Watchdog(timeout, stopped.append, rank=1)
    try:
        watchdog.call("Bcast on the job communicator", lambda: _wait_for(stopped))
    finally:
        watchdog.close()
    (message,) = stopped
    assert message.startswith(f"--timeout {timeout:g} s (or MPISync's timeout=)") == leads
    assert "in Bcast on the job communicator (setup)" in message, message
    assert ("for a rank that has not joined it" in message) != leads, message


def _wait_for(stopped: list[str], limit: float = 10) -> None:
    """Return once the watchdog has stopped the job (``stopped`` holds its message)."""
    deadline = time.monotonic() + limit
    while not stopped and time.monotonic() < deadline:
        time.sleep(0.005)
