"""A model rebuilt after ``setup`` trained by two ranks under ``mpiexec -n 2``: every rank
stops at its first gradient with the refusal LocalSync and PServerSync give, and neither
model moves. MPISync trained nothing there and exited 0.

This file is also the ranks' script (``python -m mpi4py test_other_model_ranks.py OUT``):
each rank writes ``OUT/rank<r>.json``, the refusal's words and whether any weight moved."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_two_ranks

pytestmark = NEEDS_MPIEXEC


@pytest.mark.timeout(120)
def test_every_rank_refuses_another_models_gradient(tmp_path):
    run_two_ranks(Path(__file__).name, tmp_path)
    for rank in range(2):
        said = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert said["refused"] == (
            "gradient of 'fc2.bias', which was not given to setup "
            "(a parameter of that name was: another model's)"
        ), said
        assert not said["moved"], said


def main(out: Path) -> None:
    """One rank: set up one model, then train another of the same names."""
    import numpy as np

    from distconv.optim import create_optimizer
    from distconv.sync.base import SyncError
    from distconv.sync.mpi import MPISync
    from tests.mpi.common import global_batches, one_step, small_lenet

    sync = MPISync(create_optimizer("sgd", lr=0.1))
    set_up, rebuilt = small_lenet(0), small_lenet(1)
    models = (*set_up.parameters(), *rebuilt.parameters())
    try:
        sync.setup(set_up.parameters(), {})
        before = [p.value.copy() for p in models]
        x, y = next(global_batches())
        refused = None
        try:
            one_step(rebuilt, sync, x[sync.rank :: 2], y[sync.rank :: 2])
        except SyncError as exc:  # every rank raises alike: none waits for another
            refused = str(exc)
            sync.setup(set_up.parameters(), {})  # ends the refused step: the job closes cleanly
        moved = any(not np.array_equal(a, p.value) for a, p in zip(before, models))
        said = {"refused": refused, "moved": moved}
        (out / f"rank{sync.rank}.json").write_text(json.dumps(said))
    finally:
        sync.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
