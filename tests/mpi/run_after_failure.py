"""mpiexec -n 2 python -m mpi4py run_after_failure.py OUT OVERLAP [sum] [first] [unpack] [half]:
rank 0's ``finish_step`` of step 2 (with ``first``: step 0, the one that records the firing
order) fails after the step's collectives (a gradient replaced after it fired; with ``unpack``:
its first bucket's copy back into the gradients raises, as a failed device copy would: on rank 0
alone, before any update), rank 0 catches the error and trains on; with ``sum`` every rank sums
a metric after each step too; with ``half`` the wire is float16 (reduced by hand: without the
thread, by the main thread in finish_step, bucket by bucket). Each rank that gets to the end
writes ``OUT/values<rank>.npz``; a rank that fails writes ``OUT/rank<r>.err``, and rank 0 then
waits (a few seconds at most) for rank 1's before it closes (which aborts the job), so that
what rank 1 said is kept.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync
from distconv.sync.mpi.buckets import Bucket


def main() -> None:
    out, overlap, options = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3:]
    summing, failing = "sum" in options, 0 if "first" in options else 2
    optimizer = create_optimizer("momentum", lr=0.1)
    wire = "float16" if "half" in options else None
    sync = MPISync(optimizer, overlap=overlap, bucket_bytes=48, grad_dtype=wire, timeout=20)
    params = [Parameter(n, np.linspace(0.1, 0.9, 3) * (i + 1)) for i, n in enumerate("abc")]
    unpacking = "unpack" in options
    if unpacking and sync.rank == 0:
        fail_first_unpack(sync, failing)
    try:
        sync.setup(params, {})
        for step in range(4):
            sync.start_step(1)
            for p in params:
                p.grad += (step + 1) * np.arange(1.0, 4.0)
                p.inc_update(sync)
                if sync.rank == 0 and step == failing and p.name == "b" and not unpacking:
                    p.grad = p.grad * 1.0  # the sync's until finish_step returns
            try:
                sync.finish_step()
            except (SyncError, RuntimeError) as exc:  # caught, on purpose: lost on this rank only
                print(f"rank {sync.rank} caught {exc}", file=sys.stderr, flush=True)
            if summing:
                sync.allreduce_sum([1.0])
    except Exception as exc:  # recorded: mpiexec may drop an aborting rank's stderr
        (out / f"rank{sync.rank}.err").write_text(f"{type(exc).__name__}: {exc}")
        if sync.rank == 0:
            wait_for(out / "rank1.err", seconds=5.0)
        raise
    finally:
        sync.close()
    np.savez(out / f"values{sync.rank}.npz", **{p.name: p.value for p in params})


def fail_first_unpack(sync: MPISync, step: int) -> None:
    """Make the main thread's unpack of the first bucket raise a RuntimeError in ``step`` (this
    process only), as a device bucket's copy back, which the main thread makes, would (with the
    communication thread a host bucket is unpacked on that thread: a no-op here)."""
    unpack = Bucket.unpack

    def failing(bucket: Bucket) -> None:
        on_main = threading.current_thread() is threading.main_thread()
        if on_main and sync.step == step and bucket.index == 0:
            raise RuntimeError(f"copying bucket 0 back failed in step {step}")
        unpack(bucket)

    Bucket.unpack = failing  # type: ignore[method-assign]


def wait_for(path: Path, seconds: float) -> None:
    """Return once ``path`` exists, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


if __name__ == "__main__":
    main()
