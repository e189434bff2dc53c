"""mpiexec -n 2 python -m mpi4py run_lr_between_fits.py OUT WHO: a Trainer over MPI fits one
epoch, the rate is changed with ``set_base_lr``, and it fits one more (``resume=True``, in
memory), as a notebook does (:func:`tests.lr_changes.fit_twice`).

``WHO`` is ``every`` (every rank sets the new rate between the fits, as it must), ``rank0``
(rank 0 alone, between the fits), ``rank0_in_fit`` (rank 0 alone, inside the second fit,
before its second step's ``super().train_step``: where the per-step rate check meets it) or
``rank0_in_forward`` (rank 0 alone, in that step's forward: inside the step, its check
posted).

Each rank writes ``OUT/rank<r>.npz`` (its weights after the second fit, or where it was
refused, as they were then) and, where that fit was refused, ``OUT/rank<r>.json`` (the
error's type and words).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from distconv.equivalence import weights
from distconv.optim import create_optimizer
from distconv.sync.mpi import MPISync
from tests.lr_changes import FIRST_LR, fit_twice, lenet_trainer

#: what each rank does, by WHO
SETS = {
    "every": ("between", "between"),
    "rank0": ("between", "no"),
    "rank0_in_fit": ("in_fit", "no"),
    "rank0_in_forward": ("in_forward", "no"),
}


def main() -> None:
    out, who = Path(sys.argv[1]), sys.argv[2]
    sync = MPISync(create_optimizer("momentum", lr=FIRST_LR))
    trainer = lenet_trainer(sync)
    try:
        try:
            fit_twice(sync, SETS[who][sync.rank], trainer)
        except Exception as exc:  # the refusal, for the test to read
            said = {"type": type(exc).__name__, "message": str(exc)}
            (out / f"rank{sync.rank}.json").write_text(json.dumps(said))
        np.savez(out / f"rank{sync.rank}.npz", **weights(trainer.network))
    finally:
        sync.close()


if __name__ == "__main__":
    main()
