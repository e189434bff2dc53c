"""The Trainer on ragged sentences under a real ``mpiexec -n 2``: equal to one process (a loop
written by hand that feeds the same sentences) with empty sentences, a rank whose share of a
step is only empty ones, a step of no token at all and a short last step; its evaluation equal
to one process's; and ranks handed other sentence boundaries stopped by the job check."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.equivalence import mismatch, weights
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.mpi.common import (
    NEEDS_MPIEXEC,
    assert_laid_out_as_fired,
    params_of,
    run_mpi,
    script,
)
from tests.sequence_tagger import (
    GLOBAL,
    OPTIMIZER,
    RANK0_EMPTY_FIRST,
    by_hand,
    lengths_in_order,
    tagged_set,
    tagger,
)

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(90)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.parametrize("case", ["", "rank0_empty", "two_tables"])
def test_two_ranks_train_ragged_sentences_as_one_process(tmp_path, case):
    """Also where rank 0's share of the first step is only empty sentences: it runs no
    backward, rank 1 does, and both still lay out their gradient buckets alike, in the order
    a backward fires (with two tables, not the parameters reversed)."""
    out = tmp_path / "ranks.npz"
    args = [str(out), *([case] if case else [])]
    proc = run_mpi(["-n", "2", *script("run_sequence_trainer.py"), *args], timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = dict(np.load(out))
    got = params_of(saved)
    data = tagged_set(lengths_in_order(RANK0_EMPTY_FIRST) if case else ())
    tables = 2 if case == "two_tables" else 1
    net = tagger(tables=tables)
    expected = by_hand(net, data, 2)
    assert (wrong := mismatch(expected, got, 1e-10)) is None, wrong
    assert mismatch(weights(tagger(tables=tables)), got) is not None  # trained: not the start
    assert_laid_out_as_fired(out, net.firing_order)  # one process's backward's order
    assert int(saved["_steps"]) == 8  # the step of no token counted, as on one process
    sync = LocalSync(create_optimizer(**OPTIMIZER))
    one = Trainer(net, sync, GLOBAL, progress=False, dtype="float64")
    sync.setup(one.trainable)
    metrics = one.evaluate(data)
    assert abs(metrics["test_loss"] - float(saved["_test_loss"])) < 1e-10
    assert abs(metrics["test_acc"] - float(saved["_test_acc"])) < 1e-12


def test_ranks_handed_other_sentence_boundaries_stop_at_the_job_check(tmp_path):
    out = tmp_path / "never.npz"
    proc = run_mpi(["-n", "2", *script("run_sequence_trainer.py"), str(out), "moved"], timeout=60)
    assert proc.returncode != 0
    assert "train_data.sampled_examples_sha256: '" in proc.stderr, proc.stderr[-3000:]
    assert "run different jobs" in proc.stderr
    assert not out.exists()


def test_ranks_handed_a_shard_each_are_told_not_to_shard(tmp_path):
    """As many sentences on each rank, other rows: the first difference is the rows', which
    said nothing of how to go on."""
    out = tmp_path / "never.npz"
    command = [*script("run_sequence_trainer.py"), str(out), "sharded"]
    proc = run_mpi(["-n", "2", *command], timeout=60)
    assert proc.returncode != 0
    assert "train_data.rows: " in proc.stderr, proc.stderr[-3000:]
    assert "do not shard it by rank" in proc.stderr
    assert not out.exists()
