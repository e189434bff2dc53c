"""mpiexec -n 2 python -m mpi4py run_layout_interrupt.py OUT: the ranks lay out their buckets
differently (rank 0 was told another firing order), so step 0's check names a layout mismatch,
gathering both layouts (an Allgather, then an Allgatherv); rank 1 reaches the gathers 1 s late,
and rank 0 gets a SIGINT 0.3 s into its wait in the first (a real Ctrl-C, raised by Python once
that wait returns). Nothing fires: ``finish_step`` completes the check. ``never`` after OUT:
rank 1 never reaches the gathers (it sleeps a minute), rank 0 gets a second SIGINT 0.6 s in, and
the watchdog (2 s) must end the job: the hold over the gathers leaves that wait to it.

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

from distconv.sync.mpi import step_agreement
from tests.mpi.common import bucket_params, bucket_sync, recorded
from tests.mpi.run_check_interrupt import what_raises


def main() -> None:
    out, never = Path(sys.argv[1]), sys.argv[2:] == ["never"]
    sync, params = bucket_sync(timeout=2 if never else 5), bucket_params()
    with recorded(sync, out):
        sync.setup(params, {})
        if sync.rank == 0:
            sync.set_firing_order([p.name for p in params])  # not reversed: another layout
        gather = step_agreement.allgather_json

        def late_or_interrupted(*args):
            if sync.rank == 1:
                time.sleep(60.0 if never else 1.0)
            else:
                for after in (0.3, 0.6) if never else (0.3,):
                    threading.Timer(after, os.kill, (os.getpid(), signal.SIGINT)).start()
            return gather(*args)

        step_agreement.allgather_json = late_or_interrupted
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
