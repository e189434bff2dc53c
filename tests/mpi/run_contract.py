"""mpiexec -n 2 python -m mpi4py run_contract.py OUT CASE: a loop of one's own around an
MPISync that breaks the sync contract in the way ``CASE`` names, each rank closing its sync in
a ``finally`` (or a ``with`` block); a rank that gets to its end writes ``OUT/end<rank>.json``
(the largest difference of its weights from rank 0's, where it has them).

``CASE``: ``scale``: every rank scales its gradients by hand between ``backward`` and
``finish_step`` (a clip where a PyTorch loop puts one); ``abandoned``: the same, in a step
whose ``except`` calls ``abandon_step`` and re-raises; ``open``: the last step has no
``finish_step`` and nothing propagates at the close; ``raises``: a ``with`` block on rank 0
raises in a step while rank 1 goes on to the next collective, waiting for rank 0; ``exit``:
the same with a clean ``sys.exit(0)`` on rank 0.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

from distconv.optim import create_optimizer
from distconv.sync.mpi import MPISync
from tests.mpi.common import global_batches, one_step, small_lenet

#: the cases whose rank 0 leaves a ``with`` block mid-step, rank 1 waiting for it
WITH_CASES = ("raises", "exit")


def _steps(net, sync, case: str) -> None:
    """The job's steps, this rank's share of each global batch, broken as ``case`` says."""
    rank = sync.rank
    for n, (x, y) in enumerate(global_batches()):
        xs, ys = x[rank::2], y[rank::2]
        last = n == 3
        if case == "abandoned":
            try:
                _backward_only(net, sync, xs, ys)
                _scale_by_hand(net)
                sync.finish_step()
            except BaseException:
                sync.abandon_step()
                raise
        elif case == "scale" or (case == "open" and last) or (case in WITH_CASES and n == 1):
            _backward_only(net, sync, xs, ys)
            if case == "open":
                return
            if case in WITH_CASES:
                if rank == 0 and case == "exit":
                    sys.exit(0)
                if rank == 0:
                    raise RuntimeError("rank 0's own error, in its with block")
                sync.barrier()  # waits for rank 0, which never comes
            _scale_by_hand(net)
            sync.finish_step()
        else:
            one_step(net, sync, xs, ys)


def _scale_by_hand(net) -> None:
    for p in net.parameters():
        p.grad *= 0.5


def _backward_only(net, sync, xs, ys) -> None:
    from distconv.arg import Arg

    sync.start_step(len(ys))
    net.forward({"image": Arg(xs, needs_grad=False), "label": Arg(ids=ys, needs_grad=False)})
    net.backward(sync, loss="loss", loss_scale=len(ys))


def main(out: Path, case: str) -> None:
    net = small_lenet(0)
    sync = MPISync(create_optimizer("sgd", lr=0.1))
    closing = sync if case in WITH_CASES else contextlib.closing(sync)
    with closing:
        sync.setup(net.parameters())
        _steps(net, sync, case)
    values = MPI.COMM_WORLD.allgather([p.value for p in net.parameters()])
    apart = max(float(np.abs(a - b).max()) for a, b in zip(*values))
    (out / f"end{sync.rank}.json").write_text(json.dumps({"apart": apart}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
