"""mpiexec -n N python -m mpi4py run_train.py OUT OPTIMIZER [options]: train, save the weights.

Rank 1 and up initialise from another seed, so equal weights at the end also show that
rank 0's parameters were broadcast. Each rank writes ``OUT/rank<r>.npz``: the weights, and under
names starting with ``_`` the bucket count, the piece count, how many buckets stream in several
pieces, the layout's last piece's elements, the bytes the gradient collectives sent (counted
from the buffers handed to MPI, :class:`CountingComm`) and whether the communication thread
ran. ``--forward-layout`` lays the buckets out in the network's order, against the order
backward fires the gradients. ``--channels`` sizes the LeNet (``small_lenet``'s).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from common import small_lenet, train, weights  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import CountingComm, MPISync, import_mpi  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("optimizer")
    parser.add_argument("--bucket-bytes", type=int, default=1 << 22)
    parser.add_argument("--overlap", type=int, choices=(0, 1), default=0)
    parser.add_argument("--grad-dtype", default=None)
    parser.add_argument("--piece-bytes", type=int, default=1 << 20)
    parser.add_argument("--first-piece-bytes", type=int, default=1 << 20)
    # 0: MPISync's default (128 KiB with the thread)
    parser.add_argument("--last-piece-bytes", type=int, default=1 << 20)
    parser.add_argument("--channels", type=int, nargs=2, default=(2, 3))
    parser.add_argument("--forward-layout", action="store_true")
    args = parser.parse_args()
    mpi = import_mpi()
    comm = CountingComm(mpi.COMM_WORLD, mpi.IN_PLACE)
    sync = MPISync(
        create_optimizer(args.optimizer),
        comm=comm,
        bucket_bytes=args.bucket_bytes,
        grad_dtype=args.grad_dtype,
        overlap=bool(args.overlap),
        first_piece_bytes=args.first_piece_bytes,
        piece_bytes=args.piece_bytes,
        last_piece_bytes=args.last_piece_bytes or None,
    )
    net = small_lenet(0 if sync.rank == 0 else 100 + sync.rank, args.channels)
    sync.setup(net.parameters(), {"batch_size": 16})
    if args.forward_layout:  # buckets laid out against the order backward fires them
        sync.set_firing_order([p.name for p in net.parameters()])
    try:
        train(net, sync, sync.rank, sync.world_size)
        pieces = [s for b in sync.buckets for s in b.pieces]  # none on a 16-bit wire
        extra = {
            "_buckets": np.array(len(sync.buckets)),
            "_pieces": np.array(sum(len(b.pieces) for b in sync.buckets)),
            "_last_piece": np.array(([0] + [s.stop - s.start for s in pieces])[-1]),
            "_streaming": np.array(sum(b.streams and len(b.pieces) > 1 for b in sync.buckets)),
            "_sent_bytes": np.array(sum(d.sent for d in comm.duplicates)),
            "_overlap": np.array(bool(sync.overlap)),
        }
        np.savez(Path(args.out) / f"rank{sync.rank}.npz", **weights(net), **extra)
    finally:
        sync.close()


if __name__ == "__main__":
    main()
