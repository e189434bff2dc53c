"""A metrics sum or a barrier inside a step left open (``finish_step`` skipped) is refused at
once, before anything is sent, in the same words on MPISync, on a parameter server's worker
and on LocalSync. On a shard the evaluation's sum went through: the epoch's metrics were
printed (a checkpoint could have been written of the half step), and only the close said that
a step was left open; LocalSync served it too.

Run as a user runs ``examples/own_loop.py``: a copy whose loop leaves step 2 open, as two
workers on a real shard (127.0.0.1, port 0) and as 2 ranks of a real ``mpiexec``; and in one
process, a worker of one rank on a real shard beside a one-rank MPISync and a LocalSync.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.arg import Arg
from distconv.sync.base import SyncError
from tests.child_env import REPO_ROOT, child_env
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.processes import run_job
from tests.source_copy import edit
from tests.sync.ps.ps_helpers import Shards, batches, run_ranks, small_net
from tests.sync.test_contract_enforced import make_sync as _make_sync

make_sync = _make_sync  # the fixture: a sync of the test's transport, its shard stopped after

pytestmark = pytest.mark.timeout(180)

#: the words a rank says of the evaluation's sum in a step left open (not imported from the
#: code it tests): 3 values (the loss sum, the right answers, the examples) after steps 0 and 1
REFUSED = (
    "summing 3 values after 2 steps: the ranks meet between steps, not in step 2 "
    "(no finish_step, or it failed)"
)
#: the line of ``examples/own_loop.py`` a copy puts its mistake before
FINISH = "        sync.finish_step()\n        step += 1\n"
#: the mistake: step 2 (the third) left open, on every rank or on rank 0 alone
LEFT_OPEN = "        if step == 2:\n            break\n"
LEFT_OPEN_ON_RANK_0 = "        if step == 2 and sync.rank == 0:\n            break\n"
#: the chief's line after an epoch, which a refused evaluation never prints
EPOCH_LINE = "epoch 1:"


def own_loop_copy(folder: Path, before_finish: str) -> str:
    """A copy of ``examples/own_loop.py`` in ``folder`` whose step runs ``before_finish`` (the
    loop's code, indented as its body) right before ``sync.finish_step()``; its path."""
    shutil.copy(REPO_ROOT / "examples" / "own_loop.py", folder / "own_loop.py")
    edit(folder, "own_loop.py", FINISH, before_finish + FINISH)
    return str(folder / "own_loop.py")


def workers_on_a_shard(script: str, tmp_path: Path) -> list[subprocess.CompletedProcess]:
    """``script --epochs 1`` run as 2 workers on a shard started by hand, as the example's
    docstring says; each worker's finished process, rank 0 first."""
    shards = Shards(tmp_path)
    try:
        endpoint = shards.start(1, 2)[0]  # distconv pserver ... --workers 2 --insecure

        def worker(rank: int) -> subprocess.CompletedProcess:
            env = child_env(DISTCONV_PSERVERS=endpoint, RANK=str(rank), WORLD_SIZE="2",
                            DISTCONV_INSECURE="1", OMP_NUM_THREADS="1")  # fmt: skip
            return run_job([sys.executable, script, "--epochs", "1"], env, 60, cwd=tmp_path)

        return run_ranks(worker, 2, timeout=90)  # type: ignore[return-value]
    finally:
        shards.stop()


def failed_mpi_ranks(folder: Path, before_finish: str) -> subprocess.CompletedProcess:
    """:func:`own_loop_copy`'s ``--epochs 1`` as 2 ranks of ``mpiexec``: the job, which must
    have failed (skipped without mpi4py)."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    script = own_loop_copy(folder, before_finish)
    done = run_mpi(["-n", "2", sys.executable, "-m", "mpi4py", script, "--epochs", "1"], 90)
    assert done.returncode != 0, done.stdout + done.stderr
    return done


def test_a_sum_in_a_step_every_worker_left_open_is_refused_at_once_on_a_shard(tmp_path):
    script = own_loop_copy(tmp_path, LEFT_OPEN)
    chief, other = workers_on_a_shard(script, tmp_path)
    for done in (chief, other):
        assert done.returncode == 1, done.stderr
        assert done.stderr.splitlines()[-1].endswith(f"SyncError: {REFUSED}"), done.stderr
        assert "sync closed in the middle" not in done.stderr  # the close adds nothing
    assert EPOCH_LINE not in chief.stdout  # no metrics of the half step


def test_a_sum_in_a_step_rank_0_alone_left_open_is_refused_there_and_named_to_rank_1(tmp_path):
    """Rank 0 refuses before it sends; its close tells the shard why, which rank 1, waiting for
    its step's push, is told (it named the ranks' different points after the shard's wait)."""
    script = own_loop_copy(tmp_path, LEFT_OPEN_ON_RANK_0)
    chief, other = workers_on_a_shard(script, tmp_path)
    assert chief.returncode == 1, chief.stderr
    assert chief.stderr.splitlines()[-1].endswith(f"SyncError: {REFUSED}"), chief.stderr
    assert other.returncode == 75, other.stderr  # stopped because another rank failed
    assert f'closed on "SyncError: {REFUSED}"' in other.stderr, other.stderr
    assert EPOCH_LINE not in chief.stdout


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_mpi_ranks_refuse_it_in_the_same_words(tmp_path):
    """The words both transports say (MPISync's, as they were)."""
    done = failed_mpi_ranks(tmp_path, LEFT_OPEN)
    assert any(f"rank {r}: SyncError: {REFUSED}" in done.stderr for r in range(2)), done.stderr
    assert EPOCH_LINE not in done.stdout


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_sync", ["mpi", "pserver", "local"], indirect=True)
def test_a_sum_and_a_barrier_in_an_open_step_are_refused_then_served_after_it(make_sync):
    """In one process, the run's step numbers as ``start_at`` told them: the refusals send
    nothing, so the step finishes and the same calls are served after it. LocalSync too: a
    loop of one's own printed the half step's metrics and wrote its checkpoint there."""
    net, (x, y) = small_net(), batches(1, 8)[0]
    with make_sync() as sync:
        sync.setup(net.parameters())
        sync.start_at(4)
        sync.start_step(len(y))
        net.forward({"image": Arg(x, needs_grad=False), "label": Arg(ids=y, needs_grad=False)})
        net.backward(sync, loss="loss", loss_scale=len(y))
        within = "the ranks meet between steps, not in step 4 (no finish_step, or it failed)"
        with pytest.raises(SyncError) as summed:
            sync.allreduce_sum([1.0, 2.0])
        assert str(summed.value) == f"summing 2 values after 4 steps: {within}"
        with pytest.raises(SyncError) as met:
            sync.barrier()
        assert str(met.value) == f"at the barrier after 4 steps: {within}"
        sync.finish_step()
        assert sync.allreduce_sum([1.0, 2.0]) == [1.0, 2.0]
        sync.barrier()
