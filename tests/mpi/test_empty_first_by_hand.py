"""A loop of one's own under a real ``mpiexec -n 2`` where rank 0's share of the first step is
only empty sentences (``fire_every_gradient``, no backward): both ranks lay out their gradient
buckets alike, in the order a backward fires, and train as one process does."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.equivalence import mismatch
from tests.mpi.common import (
    NEEDS_MPIEXEC,
    assert_laid_out_as_fired,
    params_of,
    run_mpi,
    script,
)
from tests.sequence_tagger import RANK0_EMPTY_FIRST, by_hand, lengths_in_order, tagged_set, tagger

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.parametrize(
    "tables, told",
    [
        (1, []),  # rank 0's first firing: the gradients handed over as a backward fires them
        (2, ["agreed"]),  # tables fired in parameter order: only the agreed order is exact
    ],
)
def test_rank0_empty_first_share_lays_out_as_a_backward_fires(tmp_path, tables, told):
    out = tmp_path / "ranks.npz"
    command = [*script("run_empty_first_by_hand.py"), str(out), str(tables), *told]
    proc = run_mpi(["-n", "2", *command], timeout=45)
    assert proc.returncode == 0, proc.stderr[-3000:]
    net = tagger(tables=tables)
    expected = by_hand(net, tagged_set(lengths_in_order(RANK0_EMPTY_FIRST)), 1)
    assert (wrong := mismatch(expected, params_of(dict(np.load(out))), 1e-10)) is None, wrong
    assert_laid_out_as_fired(out, net.firing_order)
