"""mpiexec -n 2 python -m mpi4py run_rank_rates.py OUT MODE: the step check of ranks whose
learning rates are, or are not, the same.

Each rank runs a real optimizer (Adam, lr 0.003) through a schedule, ``scale_lr`` as
``set_lr_scale`` does, and posts each step's check on ``COMM_WORLD`` with its optimizer's rate,
as :class:`~distconv.sync.mpi.MPISync` posts it at ``start_step``:

- ``skew``: rank r scales by ``factor * (1 + r)`` (a schedule that reads a rank-local value);
- ``same``: every rank scales by the same factors (``--lr-decay`` per epoch, then a per-step
  cosine), for four steps.

Each rank writes ``OUT/said<rank>.json``: per step, the examples summed or the refusal's words,
and the bytes of each Iallgather it posted (the exchange's whole cost).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.mpi import import_mpi
from distconv.sync.mpi.step_check import StepCheck

LAYOUT = {"bucket 0": {"names": ["conv1.weight", "conv1.bias"], "bytes": 400}}
LAYOUT_HASH = 0x0123456789ABCDE  # what layout.py's 60 bits look like


class Counted:
    """``comm``, its Iallgathers' send and receive bytes recorded."""

    def __init__(self, comm) -> None:
        self.comm, self.sent = comm, []

    def Iallgather(self, mine, every):  # noqa: N802 - mpi4py's spelling
        self.sent.append([mine.nbytes, every.nbytes])
        return self.comm.Iallgather(mine, every)

    def __getattr__(self, name):
        return getattr(self.comm, name)


def factor(step: int, epoch: int) -> float:
    """``--lr-decay 0.9`` per epoch times a per-step cosine: what every rank computes alike."""
    return 0.9**epoch * 0.5 * (1 + math.cos(math.pi * step / 7))


def main() -> None:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    comm = Counted(import_mpi().COMM_WORLD)
    rank, check = comm.Get_rank(), StepCheck(comm)
    optimizer = create_optimizer("adam", lr=0.003)
    said = []
    for step in range(4):
        optimizer.scale_lr(factor(step, epoch=step // 2) * ((1 + rank) if mode == "skew" else 1))
        check.post(step, LAYOUT, LAYOUT_HASH, 4 + rank, optimizer.lr)
        try:
            said.append({"step": step, "examples": check.complete()})
        except SyncError as refused:
            said.append({"step": step, "refused": str(refused)})
            break
    record = {"said": said, "iallgather_bytes": comm.sent, "lr_bits": optimizer.lr.hex()}
    (out / f"said{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
