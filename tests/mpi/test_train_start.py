"""``distconv train --sync mpi``: a rank that fails before MPI is initialised ends the job.

The other ranks wait for it inside ``MPI_Init`` (which waits for every rank), where neither the
sync's checks nor its watchdog run, and MPICH's Hydra ends a job for a rank that exits non-zero
only once that rank has initialised MPI: before the fix each of these jobs hung until killed.
"""

from __future__ import annotations

import shutil
import sys

import pytest

from distconv.sync.errors import DATA_ADVICE
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

TRAIN = [sys.executable, "-m", "mpi4py", "-m", "distconv", "train", "--no-progress"]


def train(tmp_path, *extra: str) -> list[str]:
    return [*TRAIN, "--sync", "mpi", "--epochs", "1", "--out", str(tmp_path / "run"), *extra]


@pytest.mark.timeout(60)
def test_one_rank_that_cannot_load_its_data_ends_the_job(tmp_path):
    """As where one host lacks the data: that rank says why, and every rank ends."""
    missing = str(tmp_path / "no-such-dir")
    command = ["-n", "1", *train(tmp_path), ":"]
    command += ["-n", "1", *train(tmp_path, "--data", "mnist", "--data-dir", missing)]
    proc = run_mpi(command, timeout=40)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "distconv train: error: DataError: MNIST directory" in proc.stderr


@pytest.mark.timeout(60)
def test_one_rank_with_a_bad_option_ends_the_job(tmp_path):
    command = ["-n", "1", *train(tmp_path), ":", "-n", "1", *train(tmp_path, "--epochs", "x")]
    proc = run_mpi(command, timeout=40)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "argument --epochs: must be an integer" in proc.stderr


@pytest.mark.timeout(60)
def test_a_rank_left_over_in_the_environment_ends_the_job(tmp_path, monkeypatch):
    """docs/operations.md's example: ``RANK=1`` left in the shell that runs ``mpiexec``. Rank 1
    agrees with it and goes on; rank 0 stops naming both sources, and must take rank 1 along."""
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    proc = run_mpi(["-n", "2", *train(tmp_path)], timeout=40)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "two sources disagree about this process's rank" in proc.stderr


@pytest.mark.timeout(60)
def test_a_rank_of_the_local_sync_beside_mpi_ranks_ends_the_job(tmp_path):
    """MPMD with ``--sync local`` on one rank: that rank is refused (local sync trains alone)
    and exited without initialising MPI, so rank 0 waited in ``MPI_Init`` for ever."""
    command = ["-n", "1", *train(tmp_path), ":", "-n", "1", *TRAIN, "--sync", "local"]
    command += ["--epochs", "1", "--out", str(tmp_path / "run")]
    proc = run_mpi(command, timeout=40)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "but local sync trains alone" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--world-size=1"], "rank 1 is out of range for world size 1"),
        (["--rank", "0", "--world-size", "1"], "an MPI launcher started this process as one of 2"),
    ],
)
def test_a_local_rank_of_its_own_beside_mpi_ranks_ends_the_job(tmp_path, flags, said):
    """``--world-size 1`` alone leaves the rank to the launcher: rank 1 is refused (out of range
    for world size 1), and exempted as 'a job of its own' it exited without initialising MPI,
    so rank 0 waited in ``MPI_Init`` for ever. With ``--rank 0`` too it trained alone
    while rank 0 waited: a local rank under an MPI launcher is refused whatever its
    flags, and ends the job."""
    command = ["-n", "1", *train(tmp_path), ":", "-n", "1", *TRAIN, "--sync", "local", *flags]
    command += ["--epochs", "1", "--out", str(tmp_path / "run2")]
    proc = run_mpi(command, timeout=40)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert said in proc.stderr, proc.stderr[-2000:]


@pytest.mark.timeout(60)
def test_ranks_of_another_transport_that_fail_alike_still_just_exit(tmp_path):
    """No rank of a parameter-server job initialises MPI: none may wait for the others in it."""
    command = ["-n", "2", *TRAIN, "--sync", "pserver", "--out", str(tmp_path / "run")]
    proc = run_mpi(command, timeout=40)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "--sync pserver needs the servers" in proc.stderr
    assert "MPI_Abort" not in proc.stderr


@pytest.mark.timeout(60)
def test_ranks_that_run_different_jobs_each_say_so_on_one_line(tmp_path):
    """The issue's MPMD case through ``distconv train`` itself: every rank raises the mismatch
    alike, none waits, so it is a user's error like any other (one line, status 1), not a
    crash's traceback and an abort from the rank whose message came first."""
    command = ["-n", "1", *train(tmp_path, "--batch-size", "16"), ":"]
    command += ["-n", "1", *train(tmp_path, "--batch-size", "8")]
    proc = run_mpi(command, timeout=40)
    assert proc.returncode == 1, proc.stderr[-2000:]
    # each rank says it; the first to end may take the other along before it has (-m mpi4py
    # aborts at exit for a non-zero status), so one line is all that is sure
    said = [
        f"distconv train: error: rank {rank} and rank {1 - rank} run different jobs: "
        f"config.batch_size: {ours} here, {theirs} there"
        for rank, ours, theirs in ((0, 16, 8), (1, 8, 16))
    ]
    assert any(line in proc.stderr for line in said), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "aborting the MPI job" not in proc.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "other, named",
    [
        ({"n_train": 8}, "train_data.examples: {ours} here, {theirs} there"),
        ({"seed": 1}, "train_data.sampled_examples_sha256: '"),
    ],
)
def test_a_rank_handed_other_data_stops_at_start_up_naming_it(tmp_path, other, named):
    """Each rank takes its strided share of the whole set it is handed. A rank whose
    ``--data-dir`` holds another set (another length, or other images of the same count, as
    its own shard would) trained on without a word, or stopped mid-epoch as "ranks are at
    different points of the job"."""
    from tests.mnist_files import write_mnist

    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir(), theirs.mkdir()
    write_mnist(ours, n_train=12)
    write_mnist(theirs, **{"n_train": 12, **other})
    for test_set in ours.glob("t10k-*"):  # the same test set: only the training sets differ
        shutil.copy(test_set, theirs / test_set.name)
    data = ["--data", "mnist", "--batch-size", "2", "--data-dir"]
    command = ["-n", "1", *train(tmp_path, *data, str(ours)), ":"]
    command += ["-n", "1", *train(tmp_path, *data, str(theirs))]
    proc = run_mpi(command, timeout=40)
    assert proc.returncode == 1, proc.stderr[-2000:]
    sizes = (12, other.get("n_train", 12))
    said = [
        f"rank {rank} and rank {1 - rank} run different jobs: "
        + named.format(ours=sizes[rank], theirs=sizes[1 - rank])
        for rank in (0, 1)
    ]
    assert any(line in proc.stderr for line in said), proc.stderr[-2000:]
    # and what to do: the hash alone said neither why nor how
    lines = [line for line in proc.stderr.splitlines() if "run different jobs" in line]
    assert lines and all(line.endswith(DATA_ADVICE) for line in lines), lines
    # found alike on every rank after setup, none waits: each says it, nothing is aborted
    assert "Traceback" not in proc.stderr and "aborting the MPI job" not in proc.stderr
    metrics = tmp_path / "run" / "metrics.jsonl"
    assert not metrics.exists() or not metrics.read_text()  # no step ran


@pytest.mark.timeout(60)
def test_a_user_error_on_rank_0_alone_is_told_to_rank_1_each_on_one_line(tmp_path):
    """Rank 0 alone opens the output directory, the others wait for it in their setup: it
    tells them (``fail_setup``), each rank says why in one line, as the command line says its
    users' errors, and leaves without a traceback or an abort. Rank 1 says what happened:
    rank 0 could not set up (not a difference of jobs, which the launcher would read as the
    ranks' different jobs: no rank blamed, no restart). No ``-m mpi4py``: its runner aborts
    the job on a rank's exit status 1, which may kill rank 1 before it says its line."""
    (tmp_path / "run").mkdir()
    # the same command run twice (an empty log is no run: a first epoch that failed leaves one)
    (tmp_path / "run" / "metrics.jsonl").write_text('{"epoch": 1, "step": 45}\n')
    command = [sys.executable, "-m", "distconv", *TRAIN[TRAIN.index("train") :]]
    command += train(tmp_path)[len(TRAIN) :]
    proc = run_mpi(["-n", "2", *command], timeout=40)
    assert proc.returncode == 1, proc.stderr[-2000:]
    said = f"{tmp_path / 'run'} already holds a run; pass --resume"
    lines = proc.stderr.splitlines()
    assert any(x.startswith(f"distconv train: error: {said}") for x in lines), proc.stderr
    told = f"distconv train: error: rank 0 could not set up: RunDirError: {said}"
    assert any(x.startswith(told) for x in lines), proc.stderr[-2000:]
    for unsaid in ("Traceback", "run different jobs", "aborting the MPI job", "Abort("):
        assert unsaid not in proc.stderr, proc.stderr[-2000:]
