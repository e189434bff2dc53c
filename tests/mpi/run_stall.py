"""mpiexec -n 2 python -m mpi4py run_stall.py CASE OVERLAP RECORDS: a rank that never joins.

Cases (each must end the job with a message naming the wait or the difference, not hang):

- ``stuck``: rank 1 stops (a long sleep) in the middle of step 1's backward, after some of its
  gradient pieces have gone: rank 0 waits in a gradient reduction (on the communication
  thread with ``OVERLAP`` 1).
- ``own``: rank 0 runs two steps, then calls a collective of its own on the sync's
  communicator (a ``Barrier``, outside the sync's meetings) while rank 1 goes on to step 2: the
  two wait in different collectives, which MPI matches by order alone; only the watchdog can
  end it.
- ``fewer``: rank 0 sums metrics after two steps (as the Trainer does after an epoch) while
  rank 1 goes on to step 2; ``closes``: rank 0 closes its sync after two steps while rank 1 sums
  metrics; ``barrier``: rank 0 waits at the barrier while rank 1 sums. The sync's meetings open
  with the ranks' exchange of where they are, so a rank names the difference at once, long
  before the watchdog (600 s here) would. ``again``: rank 0 calls setup a second time after two
  steps while rank 1 goes on to step 2; setup opens with the same exchange, so it is named too.
- ``late``: after two steps both ranks set up again (a second fit), but rank 1 stops (a long
  sleep) before its setup: rank 0 waits in setup's first exchange, and says so (the phase is
  ``setup``, not ``after step 1``).
- ``early``: rank 0 catches an error before setup (a checkpoint it cannot read) and closes its
  sync, while rank 1 waits in setup: closing before setup aborts the job, long before the
  watchdog (600 s here) would.

Each rank sends its stderr and its log to ``RECORDS/rank<r>.err`` (``mpiexec`` may tear the
job down before it relays an aborting rank's stderr). The watchdog's timeout is 2 s in cases
``stuck`` and ``late``; in case ``own`` 2 s on rank 1 and 4 s on rank 0, and rank 1's stop
waits until rank 0 has warned (at 2 s) in its record, so that the warning comes first however
late rank 0's watchdog looks (a 1 s gap between the two on their clocks alone was raced on a
loaded host); 600 s in the others. The ranks meet once before
the sync is made, so that no rank's slower start is taken for a stall.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import global_batches, one_step, small_lenet  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import MPISync, import_mpi  # noqa: E402

#: per case, the watchdog's timeout on each rank
TIMEOUTS = {"stuck": (2.0, 2.0), "own": (4.0, 2.0), "late": (2.0, 2.0)}  # else 600 s: never


class StallingSync(MPISync):
    """Rank 1 sleeps for a minute at the fifth gradient of step 1 (case ``stuck``)."""

    case, calls = "", 0

    def on_gradient(self, param):
        self.calls += 1
        if self.case == "stuck" and self.rank == 1 and self.step == 1 and self.calls % 8 == 5:
            time.sleep(60)
        super().on_gradient(param)


def record_to(records: Path, rank: int) -> None:
    """This rank's stderr and log into ``records/rank<rank>.err``, written as they come."""
    f = open(records / f"rank{rank}.err", "w", buffering=1)  # noqa: SIM115 - the process's
    os.dup2(f.fileno(), 2)
    sys.stderr = f
    logging.basicConfig(stream=f, level=logging.WARNING, format="%(message)s")


def stop_once_warned(sync: MPISync, record: Path, limit: float = 8) -> None:
    """``sync``'s watchdog stops the job once ``record`` (another rank's) holds a watchdog's
    warning, or ``limit`` seconds into its wait for one (the test then finds none)."""
    stop_job = sync._watchdog._stop_job

    def stop(message: str) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and not (
            record.exists() and "waited" in record.read_text()
        ):
            time.sleep(0.01)
        stop_job(message)

    sync._watchdog._stop_job = stop


def main() -> None:
    case, overlap, records = sys.argv[1], sys.argv[2] == "1", Path(sys.argv[3])
    world = import_mpi().COMM_WORLD
    world.Barrier()  # every rank started: the timeouts below count from a common start
    timeout = TIMEOUTS.get(case, (600.0, 600.0))[world.Get_rank()]
    sync = StallingSync(create_optimizer("sgd"), bucket_bytes=300, overlap=overlap, timeout=timeout)
    sync.case = case
    record_to(records, sync.rank)
    if case == "own" and sync.rank == 1:
        stop_once_warned(sync, records / "rank0.err")
    net = small_lenet(seed=0)
    rank, world = sync.rank, sync.world_size
    if case == "early" and rank == 0:
        try:
            raise OSError("rank 0 cannot read its checkpoint")
        except OSError:
            pass  # caught: the script goes on, and closes its sync outside the handler
        sync.close()
        return
    try:
        sync.setup(net.parameters(), {})
        for step, (x, y) in enumerate(global_batches()):
            if step == 2 and rank == 0 and case in ("own", "fewer", "closes", "barrier", "again"):
                if case == "own":  # never met: rank 1 is at step 2's check
                    sync.comm.Barrier()
                elif case == "again":  # met by step 2's check, which names the difference
                    sync.setup(net.parameters(), {})
                elif case == "fewer":  # met by step 2's check, which names the difference
                    sync.allreduce_sum([1.0, 2.0])
                elif case == "barrier":  # met by rank 1's metrics
                    sync.barrier()
                break  # "closes": the close's exchange meets rank 1's metrics
            if step == 2 and case == "late":  # a second fit: rank 1 does not come to it
                if rank == 1:
                    time.sleep(60)
                sync.setup(net.parameters(), {})
                break
            if step == 2 and rank == 1 and case in ("closes", "barrier"):
                sync.allreduce_sum([1.0, 2.0])
                break
            one_step(net, sync, x[rank::world], y[rank::world])
    finally:
        sync.close()


if __name__ == "__main__":
    main()
