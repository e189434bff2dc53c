"""``examples/own_loop.py``, a training loop of one's own around a sync, run as a user runs it:
alone, as 2 ranks of ``mpiexec``, and as 2 workers against a shard started by hand
(``distconv pserver``), each for one epoch and then resumed from its checkpoint for two more.
In float64 the three print the numbers one process prints in one go (docs/architecture.md,
"One global batch": to 1e-10): the same global batches, an empty share in each epoch's last
step, the loss seeded with its rows, the optimizer's momentum carried through the checkpoint."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.child_env import REPO_ROOT, child_env
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.processes import run_job
from tests.sync.ps.ps_helpers import Shards, run_ranks

pytestmark = pytest.mark.timeout(180)

EXAMPLE = str(REPO_ROOT / "examples" / "own_loop.py")
#: the chief's line after each epoch
EPOCH = re.compile(r"^epoch (\d+): step (\d+) test loss (\S+) accuracy (\S+)$", re.M)


def numbers(stdout: str) -> list[tuple[int, int, float, float]]:
    """Each epoch's line: its epoch, the run's steps so far, the test loss and accuracy."""
    return [(int(e), int(s), float(loss), float(a)) for e, s, loss, a in EPOCH.findall(stdout)]


def alone(*args: str, cwd: Path) -> str:
    done = run_job([sys.executable, EXAMPLE, *args], child_env(OMP_NUM_THREADS="1"), 60, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr  # loss_scale passed: nothing to warn of
    return done.stdout


def split_then_resumed(run, tmp_path: Path) -> list[tuple[int, int, float, float]]:
    """``run(args)`` (the chief's stdout) for epoch 1 saving a checkpoint, then resumed from it
    to epoch 3; the epochs' numbers of both runs."""
    ckpt = str(tmp_path / "own_loop.safetensors")
    first = run(["--epochs", "1", "--checkpoint", ckpt])
    return numbers(first) + numbers(run(["--epochs", "3", "--checkpoint", ckpt, "--resume"]))


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> list[tuple[int, int, float, float]]:
    """Three epochs in one go, alone: the numbers every other way must print."""
    got = numbers(alone("--epochs", "3", cwd=tmp_path_factory.mktemp("alone")))
    assert [(e, s) for e, s, _, _ in got] == [(1, 8), (2, 16), (3, 24)]
    (_, _, first_loss, _), (_, _, last_loss, last_accuracy) = got[0], got[-1]
    assert last_loss < 0.8 * first_loss and last_accuracy >= 0.6  # it learns (3 classes)
    return got


def assert_same(got, expected) -> None:
    """Same epochs and steps; loss and accuracy to 1e-10 of each other."""
    assert [(e, s) for e, s, _, _ in got] == [(e, s) for e, s, _, _ in expected]
    for (*_, loss, acc), (*_, want_loss, want_acc) in zip(got, expected, strict=True):
        assert loss == pytest.approx(want_loss, rel=1e-10)
        assert acc == pytest.approx(want_acc, rel=1e-10)


def test_one_process_prints_what_the_trainer_reports_of_the_same_run(one_process):
    """The loop is the Trainer's steps written out, so ``fit`` on its model, data and
    optimizer (the example's ``dist.init("momentum", lr=0.05, momentum=0.9)``) with a batch of
    8 reports its numbers. The other ways are compared with the one process only: a mistake
    they all share (``start_step`` told the global batch, the shuffle's seed) shows here."""
    example = runpy.run_path(EXAMPLE)  # not as __main__: it defines, and runs nothing
    sync = LocalSync(create_optimizer("momentum", lr=0.05, momentum=0.9))
    try:
        trainer = Trainer(example["build_model"](), sync, batch_size=8, progress=False)
        records = trainer.fit(
            {"x": example["X"], "label": example["Y"]},
            {"x": example["X_TEST"], "label": example["Y_TEST"]},
            epochs=3,
        )
    finally:
        sync.close()
    assert_same(
        one_process, [(r["epoch"], r["step"], r["test_loss"], r["test_acc"]) for r in records]
    )


def test_a_resume_without_a_checkpoint_file_is_refused_in_one_line(tmp_path):
    """Before, a TypeError's traceback from inside load_checkpoint(None)."""
    done = run_job([sys.executable, EXAMPLE, "--resume"], child_env(), 60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "own_loop.py: error: --resume needs --checkpoint FILE, the file to go on from"
    )


def test_a_negative_global_batch_is_refused_naming_the_flag(tmp_path):
    """Before, -8 passed the check (divmod gives -8 and no rest) and ended in the sampler's
    traceback naming batch_size, a name the user never typed."""
    argv = [sys.executable, EXAMPLE, "--global-batch", "-8", "--epochs", "1"]
    done = run_job(argv, child_env(), 60, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "own_loop.py: error: RuntimeConfigError: --global-batch -8: pass a multiple of the "
        "1 rank(s), 1 or more each"
    )


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_a_global_batch_the_ranks_do_not_divide_is_refused_on_every_rank():
    """8 over 3 ranks: before, 2 a rank, steps of 6, and numbers other than one process's
    printed as if they were the same."""
    done = run_mpi(["-n", "3", sys.executable, "-m", "mpi4py", EXAMPLE], timeout=90)
    assert done.returncode == 1, done.stdout + done.stderr
    said = "RuntimeConfigError: --global-batch 8: pass a multiple of the 3 rank(s), 1 or more each"
    assert all(f"rank {r}: {said}" in done.stderr for r in range(3)), done.stderr
    assert numbers(done.stdout) == []


def test_alone_resumed_from_its_checkpoint_prints_what_one_run_prints(one_process, tmp_path):
    got = split_then_resumed(lambda args: alone(*args, cwd=tmp_path), tmp_path)
    assert_same(got, one_process)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_two_mpi_ranks_print_what_one_process_prints(one_process, tmp_path):
    def run(args: list[str]) -> str:
        done = run_mpi(["-n", "2", sys.executable, "-m", "mpi4py", EXAMPLE, *args], timeout=90)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert_same(split_then_resumed(run, tmp_path), one_process)


def test_two_workers_on_a_shard_started_by_hand_print_what_one_process_prints(
    one_process, tmp_path
):
    """Each run on a shard of its own started afresh: the resumed one holds nothing of the
    first, so the momentum comes from the chief's checkpoint alone."""
    shards = Shards(tmp_path)

    def run(args: list[str]) -> str:
        endpoint = shards.start(1, 2)[0]  # distconv pserver ... --workers 2 --insecure

        def worker(rank: int):
            env = child_env(DISTCONV_PSERVERS=endpoint, RANK=str(rank), WORLD_SIZE="2",
                            DISTCONV_INSECURE="1", OMP_NUM_THREADS="1")  # fmt: skip
            return run_job([sys.executable, EXAMPLE, *args], env, 60, cwd=tmp_path)

        chief, other = run_ranks(worker, 2, timeout=90)
        assert chief.returncode == other.returncode == 0, chief.stderr + other.stderr
        assert numbers(other.stdout) == []  # the chief alone prints and saves
        return chief.stdout

    try:
        got = split_then_resumed(run, tmp_path)
    finally:
        shards.stop()
    assert_same(got, one_process)
