"""mpiexec -n 2 python -m mpi4py run_layout_interrupt.py OUT: the ranks lay out their buckets
differently (rank 0 was told another firing order), so step 0's check names a layout mismatch,
gathering both layouts (an Allgather, then an Allgatherv); rank 1 reaches the gathers 1 s late,
and rank 0 gets a SIGINT 0.3 s into its wait in the first (a real Ctrl-C, raised by Python once
that wait returns). Nothing fires: ``finish_step`` completes the check.

Each rank writes what ``finish_step`` raised to ``OUT/said<rank>.txt`` (with its cause), then
closes. A rank that fails otherwise writes ``OUT/rank<r>.err``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from distconv.sync.mpi import step_check
from tests.mpi.common import bucket_params, bucket_sync, recorded
from tests.mpi.run_check_interrupt import what_raises


def main() -> None:
    out = Path(sys.argv[1])
    sync, params = bucket_sync(timeout=5), bucket_params()
    with recorded(sync, out):
        sync.setup(params, {})
        if sync.rank == 0:
            sync.set_firing_order([p.name for p in params])  # not reversed: another layout
        gather = step_check.difference_from

        def late_or_interrupted(*args):
            if sync.rank == 1:
                time.sleep(1.0)
            else:
                pid = os.getpid()
                threading.Timer(0.3, os.kill, (pid, signal.SIGINT)).start()
            return gather(*args)

        step_check.difference_from = late_or_interrupted
        sync.start_step(1)
        caught: list[BaseException] = []

        def finish() -> None:
            try:
                sync.finish_step()
            except BaseException as exc:
                caught.append(exc)
                raise

        said = what_raises(finish)
        cause = caught[0].__cause__ if caught else None
        said += f" (from {type(cause).__name__}: {cause})" if cause is not None else ""
        (out / f"said{sync.rank}.txt").write_text(said)


if __name__ == "__main__":
    main()
