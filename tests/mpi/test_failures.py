"""No hangs: a crashing rank ends the job, ranks that disagree stop with a message.

Each test starts its own ``mpiexec``; its timeout (30 s) is the bound the issue sets, so a
hang fails the test by ``TimeoutExpired`` rather than by a timed assertion.
"""

from __future__ import annotations

import sys

import pytest

from tests.mpi.common import HERE, mpiexec, run_mpi, script

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed"),
]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_one_rank_raising_ends_the_job(overlap):
    # plain python, not -m mpi4py: the exception hook MPISync installs must do the aborting
    proc = run_mpi(["-n", "2", sys.executable, str(HERE / "run_crash.py"), overlap], timeout=30)
    assert proc.returncode != 0
    assert "rank 1 fails on purpose" in proc.stderr


def mpmd(ours: list[str], theirs: list[str]) -> str:
    """Run two ranks with different arguments; returns what they printed on stderr."""
    command = ["-n", "1", *script("run_mismatch.py"), *ours]
    command += [":", "-n", "1", *script("run_mismatch.py"), *theirs]
    proc = run_mpi(command, timeout=30)
    assert proc.returncode != 0
    return proc.stderr


def test_different_batch_sizes_stop_with_a_message():
    err = mpmd(["--batch-size", "16"], ["--batch-size", "8"])
    assert "different jobs" in err
    assert "config.batch_size: 16 here, 8 there" in err or "config.batch_size: 8 here, 16" in err


def test_different_models_stop_with_a_message():
    err = mpmd(["--channels", "2,3"], ["--channels", "2,4"])
    assert "different jobs" in err and "parameter 2: ['conv2.weight', [" in err


def test_different_bucket_layouts_stop_at_the_step_check():
    err = mpmd([], ["--reverse-order"])
    assert "step 0: rank" in err and "lay out gradient buckets differently" in err
