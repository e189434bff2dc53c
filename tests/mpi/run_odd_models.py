"""mpiexec -n 2 python -m mpi4py run_odd_models.py OUT OPTIONS_JSON: an odd model trained.

The model (:data:`SHAPES`, :data:`DTYPES`): zero-element parameters, a float32 scalar, float32
and float64 parameters mixed, and a parameter (``p5``) that only examples whose id is a multiple
of 3 reach, so in some steps it fires on one rank only, in others on none while the rest fire.
The global batches (:data:`BATCHES`) leave a rank without examples (1 over 2 ranks, and 0),
and the job sets the sync up twice (a second fit). Every rank starts from its own values: rank
0's broadcast must reach every parameter. :func:`train` also runs the single-process reference
(``LocalSync`` on the whole batch), and each rank writes ``OUT/rank<r>.npz``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncStrategy

SHAPES = [(0,), (), (5,), (2, 3), (0, 4), (7,)]
DTYPES = [np.float64, np.float32, np.float32, np.float64, np.float32, np.float64]
#: the global batch of each step, the example ids numbered on from step to step
BATCHES = [4, 1, 3, 0, 5]


def gradients(step: int, examples: list[int]) -> dict[int, np.ndarray]:
    """The gradients (sums over ``examples``) of the parameters these examples reach."""
    out = {}
    for i, shape in enumerate(SHAPES):
        reach = [e for e in examples if i != 5 or e % 3 == 0]
        if reach:
            k = np.arange(int(np.prod(shape))).reshape(shape)
            out[i] = sum(np.cos(k * (e + 1) + step + i) for e in reach).astype(DTYPES[i])
    return out


def train(sync: SyncStrategy, rank: int = 0, world: int = 1) -> dict[str, np.ndarray]:
    """Two fits of one epoch each on one sync; the final values by name."""
    params = [
        Parameter(f"p{i}", (rank / 2 + np.linspace(-1, 1, int(np.prod(s)))).reshape(s).astype(d))
        for i, (s, d) in enumerate(zip(SHAPES, DTYPES))
    ]
    for _ in range(2):  # each fit sets the sync up again
        sync.setup(params, {})
        first = 0
        for step, n in enumerate(BATCHES):
            mine = list(range(first, first + n))[rank::world]
            first += n
            sync.start_step(len(mine))
            for i, grad in gradients(step, mine).items():
                params[i].grad += grad
                params[i].inc_update(sync)
            sync.finish_step()
    return {p.name: p.value.copy() for p in params}


def main() -> None:
    from distconv.sync.mpi import MPISync

    out, options = Path(sys.argv[1]), json.loads(sys.argv[2])
    sync = MPISync(create_optimizer("adam"), timeout=60, **options)
    try:
        values = train(sync, sync.rank, sync.world_size)
        np.savez(out / f"rank{sync.rank}.npz", **values)
    finally:
        sync.close()


if __name__ == "__main__":
    main()
