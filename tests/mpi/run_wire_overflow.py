"""mpiexec -n 2 python -m mpi4py run_wire_overflow.py OVERLAP ERRORS_DIR [caught|run_main]: a
16-bit wire whose sum overflows.

OVERLAP: ``0`` (no communication thread), ``1`` (the thread) or ``device`` (the thread, and the
parameter on the stand-in device of ``tests/mpi/fake_cupy``: a device bucket is unpacked, so
its wire checked, on the main thread, as a GPU's is); ``mixed-early`` and ``mixed-late``:
``device``'s, but ``u`` on the host, its sum past float16's range too: refused on the thread
after ``w``'s on the main thread, before close (``-early``: the rank waits, bounded, until its
thread has refused it) or while close drains the flags (``-late``: the thread's check of ``u``
waits, bounded, until close begins that drain). Each reaches one of close's two ways past a
refusal on every rank's thread in the same order on every run, where ``mixed`` reached one or
the other by the threads' timing.

Each rank holds a float64 parameter ``w`` and one example whose gradient, averaged over the
step's two examples, is 40,000: finite in float16 on each rank, but the ranks' sum (80,000) is
past float16's largest value (65,504). Each rank writes what ``finish_step`` raised and its
parameter's values after it to ``ERRORS_DIR/rank<r>.err`` and ``rank<r>.npy``, then raises: the
sync's ``close`` ends the job. ``caught``: the error is not raised, the sync closed after it (a
close that aborts ends the job with a status not 0). ``run_main``: ``main`` is run through
``distconv.distributed.run_main`` (start it without ``-m mpi4py``, whose runner aborts on any
exit status but 0), the sync closed in its ``finally`` as the README's script does; and the
last value's average is past float16's range on each rank alone, with opposite signs (200,000
and -200,000 summed over the step: +inf and -inf on the wire, NaN summed), refused alike.
A parameter ``u``, fired first, has the bucket after ``w``'s: the thread reduces it after the
refusal (``device``), or skips it (``1``).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np

if sys.argv[1] not in ("0", "1"):  # the stand-in device
    sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_cupy"))

from distconv.backend import to_host
from distconv.distributed import run_main
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync
from distconv.sync.mpi.buckets import Bucket
from distconv.sync.mpi.used import UsedParams

#: how long a bounded wait for the other thread waits: far past what it needs, inside the test's
BOUND_SECONDS = 10.0


def check_u_once_close_drains() -> None:
    """``mixed-late``: the thread's check of ``u``'s bucket waits until close begins to drain
    the used-parameter flags, whose wait it queued behind ``u``: that wait hands the thread's
    refusal to close inside the drain."""
    draining = threading.Event()
    check_wire, drain = Bucket.check_wire, UsedParams.drain

    def check_u_late(bucket: Bucket) -> None:
        off_main = threading.current_thread() is not threading.main_thread()
        if off_main and [p.name for p in bucket.params] == ["u"]:
            draining.wait(BOUND_SECONDS)
        check_wire(bucket)

    def drain_telling(used: UsedParams) -> None:
        draining.set()
        drain(used)

    Bucket.check_wire, UsedParams.drain = check_u_late, drain_telling


def until_the_thread_refused(sync: MPISync) -> None:
    """``mixed-early``: wait, bounded, until the thread has refused ``u``'s bucket, so that
    close finds the refusal already made (it skips the drain)."""
    ends = time.monotonic() + BOUND_SECONDS
    while sync._thread.error is None:
        if time.monotonic() > ends:
            raise RuntimeError("the thread never refused u's bucket")
        time.sleep(0.001)


def main() -> None:
    overlap, errors, caught = sys.argv[1] != "0", Path(sys.argv[2]), sys.argv[3:] == ["caught"]
    to = np.asarray
    if sys.argv[1] not in ("0", "1"):
        import cupy

        to = cupy.asarray
    mixed = sys.argv[1].startswith("mixed")  # u on the host, past float16's range too
    if sys.argv[1] == "mixed-late":
        check_u_once_close_drains()
    param = Parameter("w", to(np.array([1.0, -1.0, 0.5])))
    # a bucket of its own after w's (reverse order)
    later = Parameter("u", np.ones(3) if mixed else to(np.ones(3)))
    sync = MPISync(create_optimizer("sgd"), grad_dtype="float16", overlap=overlap, bucket_bytes=24)
    try:
        sync.setup([later, param], {})
        sync.start_step(1)
        later.grad += np.full(3, 80_000.0) if mixed else to(np.ones(3))
        sync(later)
        signs = sys.argv[3:] == ["run_main"]  # each rank's inf, of opposite signs
        param.grad += to(np.array([80_000, 1, (-1.0) ** sync.rank * 200_000 if signs else -1]))
        sync(param)
        sync.finish_step()
    except Exception as error:
        (errors / f"rank{sync.rank}.err").write_text(f"{type(error).__name__}: {error}\n")
        np.save(errors / f"rank{sync.rank}.npy", to_host(param.value))
        if not caught:
            raise
        if sys.argv[1] == "mixed-early":
            until_the_thread_refused(sync)
    finally:
        sync.close()


if __name__ == "__main__":
    run_main(main) if sys.argv[3:] == ["run_main"] else main()
