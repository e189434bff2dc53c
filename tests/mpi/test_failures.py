"""No hangs: a crashing rank ends the job, ranks that disagree stop with a message.

Each test starts its own ``mpiexec``; its timeout (30 s) is the bound the issue sets, so a
hang fails the test by ``TimeoutExpired`` rather than by a timed assertion.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.mpi.common import HERE, NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_one_rank_raising_ends_the_job(overlap, tmp_path):
    # plain python, not -m mpi4py: the exception hook MPISync installs must do the aborting
    command = ["-n", "2", sys.executable, str(HERE / "run_crash.py"), overlap, str(tmp_path)]
    proc = run_mpi(command, timeout=30)
    assert proc.returncode != 0
    # the cause, relayed on stderr, or in the rank's own record where mpiexec dropped stderr
    # while tearing the job down (the hook's printing itself: test_abort_hook.py)
    records = [f.read_text() for f in tmp_path.glob("rank*.err")]
    assert "rank 1 fails on purpose" in "\n".join([proc.stderr, *records])
    # MPICH unlinks the node's shared-memory file in MPI_Finalize, which an abort skips: each
    # aborted job left 2 MiB in /dev/shm until the host rebooted
    segments = {line for f in tmp_path.glob("rank*.shm") for line in f.read_text().split()}
    assert segments, "the ranks mapped no shared-memory file: nothing was checked"
    assert [path for path in segments if Path(path).exists()] == []


def mpmd(tmp_path: Path, ours: list[str], theirs: list[str]) -> str:
    """Run two ranks with different arguments; returns their errors (stderr, and each rank's
    own record: mpiexec may drop an aborting rank's stderr when it tears the job down)."""
    errors = ["--errors", str(tmp_path)]
    command = ["-n", "1", *script("run_mismatch.py"), *ours, *errors]
    command += [":", "-n", "1", *script("run_mismatch.py"), *theirs, *errors]
    proc = run_mpi(command, timeout=30)
    assert proc.returncode != 0
    records = [f.read_text() for f in sorted(tmp_path.glob("rank*.err"))]
    assert records, f"no rank recorded an error; stderr: {proc.stderr[-2000:]}"
    return "\n".join([proc.stderr, *records])


def test_different_batch_sizes_stop_with_a_message(tmp_path):
    err = mpmd(tmp_path, ["--batch-size", "16"], ["--batch-size", "8"])
    assert "different jobs" in err
    assert "config.batch_size: 16 here, 8 there" in err or "config.batch_size: 8 here, 16" in err


def test_different_models_stop_with_a_message(tmp_path):
    err = mpmd(tmp_path, ["--channels", "2,3"], ["--channels", "2,4"])
    assert "different jobs" in err and "parameter 2: ['conv2.weight', [" in err


def test_models_that_differ_only_in_an_activation_stop_with_a_message(tmp_path):
    """Parameters of the same names, shapes and dtypes passed the check, and the ranks summed
    gradients of two different functions; the Trainer compares the layers too."""
    err = mpmd(tmp_path, ["--fc1-act", "relu"], ["--fc1-act", "tanh"])
    assert "different jobs" in err
    assert re.search(r"config\.layers\.fc1\.act: '(ReLU|Tanh)' here, '(Tanh|ReLU)' there", err), err


def test_ranks_that_differ_in_streaming_pieces_stop_at_setup_naming_it(tmp_path):
    """``stream`` (API only) lays out the last piece differently with the thread: the step
    check caught it, hinting at another firing order although the names matched.
    It is in the job description now, so setup names it."""
    err = mpmd(tmp_path, ["--overlap", "1"], ["--overlap", "1", "--no-stream"])
    assert "different jobs" in err
    assert re.search(r"config\.sync\.stream: (True|False) here, (False|True) there", err), err


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_different_bucket_layouts_stop_at_the_step_check(tmp_path, overlap):
    """With the communication thread too, which completes the check while backward runs."""
    err = mpmd(tmp_path, ["--overlap", overlap], ["--overlap", overlap, "--reverse-order"])
    assert "lay out gradient buckets differently" in err
    assert "step 0: rank 0 and rank 1" in err or "step 0: rank 1 and rank 0" in err
    assert re.search(r"bucket \d+: .* here, .* there", err), err


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_layout_mismatch_is_named_before_any_piece_goes(tmp_path, overlap):
    """Pieces that go as soon as their gradients are in (one bucket of many pieces): the step
    check still completes before the first of them, so no rank starts a gradient collective
    with a rank that lays out its buckets differently (with the thread too)."""
    plan = ["--bucket-bytes", "2000", "--first-piece-bytes", "64", "--piece-bytes", "256"]
    plan += ["--overlap", overlap]
    err = mpmd(tmp_path, plan, [*plan, "--reverse-order"])
    assert "lay out gradient buckets differently" in err
    assert "step 0: rank 0 and rank 1" in err or "step 0: rank 1 and rank 0" in err
    started = re.findall(r"gradient collectives started: (\d+)", err)
    assert started and set(started) == {"0"}, err
