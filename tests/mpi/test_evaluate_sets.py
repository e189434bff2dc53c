"""``Trainer.evaluate`` under a real ``mpiexec -n 2``: every rank must be handed the whole test
set, as for ``fit``; ranks handed their own shards are named, not averaged over a part."""

from __future__ import annotations

import json

import pytest

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script, small_lenet, trainer_data

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def _evaluate(tmp_path, handed: str):
    out = tmp_path / f"{handed}.json"
    proc = run_mpi(["-n", "2", *script("run_evaluate.py"), str(out), handed], timeout=100)
    return proc, out


@pytest.mark.parametrize("handed", ["whole", "cast"])
def test_ranks_handed_the_whole_set_evaluate_it_as_one_process(tmp_path, handed):
    """``cast``: rank 1's images in float32 are the same set to a float64 trainer (fit's job
    check compares the sets as cast too)."""
    proc, out = _evaluate(tmp_path, handed)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trainer = Trainer(small_lenet(seed=0), LocalSync(create_optimizer("adam", lr=0.01)), 8,
                      progress=False, dtype="float64")  # fmt: skip
    trainer.fit(trainer_data(24), epochs=1)
    expected = trainer.evaluate(trainer_data(40, seed=5))
    rel = 1e-12 if handed == "whole" else 1e-6  # cast: the images rounded to float32
    assert json.loads(out.read_text()) == pytest.approx(expected, rel=rel)


def test_ranks_handed_their_own_shards_are_named_not_averaged_over_half(tmp_path):
    """Two shards of 20 examples: each rank summed its stride share of its own shard, 20 of the
    40 examples, and every rank reported that mean as the set's without a word."""
    proc, out = _evaluate(tmp_path, "shard")
    assert proc.returncode != 0
    assert "evaluate different sets" in proc.stderr, proc.stderr[-3000:]
    assert not out.exists()
