"""mpiexec -n 1 python -m mpi4py run_mismatch.py ARGS : -n 1 ... OTHER_ARGS: ranks that differ.

``--batch-size`` goes into the job description, ``--channels`` changes the model, and
``--reverse-order`` makes this rank claim another firing order after the first step, so its
bucket layout differs. ``--fc1-act`` gives ``fc1`` another activation, which no parameter
shows, and trains with the Trainer, whose start-up check compares the layers. Every case
must end with a message naming the difference, not a hang.
``--bucket-bytes``, ``--first-piece-bytes`` and ``--piece-bytes`` set the piece plan,
``--no-stream`` holds every piece to the end of backward.
``--errors DIR`` also writes each rank's error to ``DIR/rank<r>.err`` before the job aborts,
with the number of gradient collectives this rank had started by then: ``mpiexec`` may tear
the job down before it relays an aborting rank's stderr, and the test is about the message, not
about the relay.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import small_lenet, train, trainer_data  # noqa: E402

from distconv import Trainer  # noqa: E402
from distconv.kernels.activation import get_activation  # noqa: E402
from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import CountingComm, MPISync, import_mpi  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--channels", default="2,3")
    parser.add_argument("--reverse-order", action="store_true")
    parser.add_argument("--errors", type=Path)
    parser.add_argument("--bucket-bytes", type=int, default=300)
    parser.add_argument("--first-piece-bytes", type=int, default=1 << 20)
    parser.add_argument("--piece-bytes", type=int, default=1 << 20)
    parser.add_argument("--overlap", choices=("0", "1"), help="default: the machine decides")
    parser.add_argument("--no-stream", action="store_true")
    parser.add_argument("--fc1-act", help="fc1's activation; trains with the Trainer")
    args = parser.parse_args()
    mpi = import_mpi()
    comm = CountingComm(mpi.COMM_WORLD, mpi.IN_PLACE)
    sync = MPISync(
        create_optimizer("sgd"),
        comm=comm,
        bucket_bytes=args.bucket_bytes,
        first_piece_bytes=args.first_piece_bytes,
        piece_bytes=args.piece_bytes,
        overlap=None if args.overlap is None else args.overlap == "1",
        stream=not args.no_stream,
    )
    try:
        net = small_lenet(0, [int(c) for c in args.channels.split(",")])
        if args.fc1_act is not None:
            net.layers["fc1"].act = get_activation(args.fc1_act)
            trainer = Trainer(net, sync, args.batch_size, progress=False, dtype="float64")
            trainer.fit(trainer_data(), epochs=1)
            return
        sync.setup(net.parameters(), {"batch_size": args.batch_size})
        if args.reverse_order:
            sync.set_firing_order([p.name for p in net.parameters()])
        train(net, sync, sync.rank, sync.world_size)
    except Exception as error:
        if args.errors is not None:
            with open(args.errors / f"rank{sync.rank}.err", "w") as f:
                f.write(f"{type(error).__name__}: {error}\n")
                started = sum(len(d.calls) for d in comm.duplicates)
                f.write(f"gradient collectives started: {started}\n")
                f.flush()
                os.fsync(f.fileno())
        raise  # to mpi4py's runner, which aborts the job


if __name__ == "__main__":
    main()
