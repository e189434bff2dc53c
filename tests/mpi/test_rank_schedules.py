"""A script's own schedule under MPI (``train_step`` sets ``set_lr_scale`` each step): one
that reads a rank-local value (``factor * (1 + rank)``) is refused at the first step on every
rank, naming both ranks and both rates, in one line (no traceback) and exit 1, as a job the
ranks run differently is; one that every rank computes alike trains as one
process does (float64, Adam, ``--lr-decay``, accumulated passes, evaluations between steps;
through a ``grad_hook`` too), with or without the communication thread. Real ``mpiexec -n 2``
jobs of ``run_rank_schedules.py``."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.equivalence import mismatch
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script, small_lenet, trainer_data, weights
from tests.mpi.run_rank_schedules import JOB, Scheduled

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: the way out the refusal names (the words, not imported from the code under test)
SAME_FACTOR = "every rank must set the same lr factor (set_lr_scale) at every step"


def two_ranks(tmp_path, mode: str, overlap: str):
    """``run_rank_schedules.py TMP_PATH MODE OVERLAP`` under ``mpiexec -n 2``: the finished
    job."""
    args = ["-n", "2", *script("run_rank_schedules.py"), str(tmp_path), mode, overlap]
    return run_mpi(args, timeout=100)


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_schedule_that_reads_the_rank_is_refused_on_every_rank_in_one_line(tmp_path, overlap):
    proc = two_ranks(tmp_path, "skew", overlap)
    assert proc.returncode == 1, proc.stderr[-3000:]
    for rank in (0, 1):
        said = (tmp_path / f"rank{rank}.err").read_text()
        other = 1 - rank
        rates = f"rank {rank} trains at lr {0.01 * (1 + rank)!r} and rank {other} at lr "
        assert f"step 0: {rates}{0.01 * (1 + other)!r}" in said, said
        assert SAME_FACTOR in said, said
        # the job's refusal, said in one line on each rank, as setup's job check says one
        lines = [line for line in proc.stderr.splitlines() if f"step 0: {rates}" in line]
        assert len(lines) == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert not list(tmp_path.glob("*.npz"))


@pytest.mark.parametrize(("mode", "overlap"), [("same", "0"), ("same", "1"), ("hook", "0")])
def test_a_schedule_every_rank_computes_alike_trains_as_one_process(tmp_path, mode, overlap):
    proc = two_ranks(tmp_path, mode, overlap)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in (0, 1)]
    net, sync = small_lenet(seed=0), LocalSync(create_optimizer("adam", lr=0.01))
    Scheduled.skew = False
    try:
        Scheduled(net, sync, 8, **JOB).fit(trainer_data(40), trainer_data(12, seed=5), epochs=2)
    finally:
        sync.close()
    for trained in ranks:
        assert mismatch(weights(net), trained) is None
    assert all(np.array_equal(ranks[0][k], ranks[1][k]) for k in ranks[0])
