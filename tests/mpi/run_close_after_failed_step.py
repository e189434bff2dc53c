"""mpiexec -n 2 python -m mpi4py run_close_after_failed_step.py OUT KIND OVERLAP [ON]: step 0's
``finish_step`` fails, each rank catches what it raised and closes its sync outside the
``except`` (no exception propagating), then writes ``OUT/closed<rank>.json``: what the step
raised and the parameters' values. Only ``b`` fires, so ``a``'s bucket goes in ``finish_step``.

``KIND``: ``refused``: rank 0's pack of ``a``'s bucket raises, said in the flags: every rank's
``finish_step`` refuses the step once its collectives completed; ``kept``: a KeyboardInterrupt on
rank 0 as the flags' wait returns (with ``OVERLAP`` 1: as the main thread's wait for the
thread's flags returns), kept while the waits are made again, raised once the step's collectives
completed (rank 1 finishes the step); ``twice``: two interrupts on rank 0, as the first gradient
piece's wait returns (with the thread: the first wait for a bucket): the second is raised with
the step's collectives left pending, so rank 0's close aborts the job. ``ON`` (optional):
``barrier``: rank 1, where its step raised nothing, goes on to the barrier before it closes;
``setup``: rank 1 goes on to step 1 while rank 0, whose step failed, sets up again (the way on
after a failed step): each writes what that raised to ``OUT/went<rank>.txt`` and waits for the
other's before it closes (its close aborts the job, which may end the other rank first);
``setups``: as ``setup``, but rank 1 sets up too.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.watchdog import WatchedRequest
from tests.mpi.common import bucket_params, bucket_sync, fire
from tests.mpi.run_pack_failure import fail_first_pack


def interrupt(owner: type, name: str, what: str, times: int) -> None:
    """The next ``times`` calls (this process) of ``owner.name`` whose first argument's name
    holds ``what`` (any call, where ``what`` is empty) return as usual, then raise a
    KeyboardInterrupt, as a SIGINT reaching this rank in that wait would."""
    call, raised = getattr(owner, name), []

    def interrupted(*args: object) -> None:
        call(*args)
        if len(raised) < times and what in getattr(args[0], "_what", ""):
            raised.append(True)
            raise KeyboardInterrupt(f"{name} #{len(raised)}")

    setattr(owner, name, interrupted)


def go_wrong(sync: MPISync, kind: str, overlap: bool) -> None:
    """Arrange rank 0's failure of kind ``kind``."""
    if kind == "refused":
        fail_first_pack(sync, "a")
    elif overlap:  # the main thread's waits on the thread: the flags', or a bucket's
        interrupt(
            CommThread, "finish" if kind == "kept" else "wait", "", 2 if kind == "twice" else 1
        )
    elif kind == "kept":
        interrupt(WatchedRequest, "Wait", "Iallreduce on the job", 1)
    else:
        interrupt(WatchedRequest, "Wait", "Iallreduce on the gradients", 2)


def go_on(sync: MPISync, params: list, setup: bool, out: Path) -> None:
    """``ON`` ``setup`` or ``setups``: a ``setup``, else step 1; what that raised written
    down, then the other rank's word waited for (10 s at most)."""
    try:
        if setup:
            sync.setup(params, {})
        else:
            sync.start_step(1)
            fire(sync, params[1], 1.0)
            sync.finish_step()
        went = "nothing"
    except SyncError as exc:
        went = str(exc)
    (out / f"went{sync.rank}.txt").write_text(went)
    other, deadline = out / f"went{1 - sync.rank}.txt", time.monotonic() + 10
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def main() -> None:
    out, kind, overlap = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    on = sys.argv[4] if len(sys.argv) > 4 else ""
    sync, params = bucket_sync(overlap=overlap, timeout=20), bucket_params()
    sync.setup(params, {})
    if sync.rank == 0:
        go_wrong(sync, kind, overlap)
    sync.start_step(1)
    fire(sync, params[1], 1.0)
    try:
        sync.finish_step()
        said = "nothing"
    except BaseException as exc:  # noqa: BLE001 - a KeyboardInterrupt too: the test reads it
        said = f"{type(exc).__name__}: {exc}"
    # outside the except: no error propagates; mpiexec may drop an aborting rank's stderr
    with open(out / f"rank{sync.rank}.err", "w") as err, contextlib.redirect_stderr(err):
        if on == "barrier" and said == "nothing":
            with contextlib.suppress(SyncError):  # refused: the other rank closed
                sync.barrier()
        elif on in ("setup", "setups"):
            go_on(sync, params, on == "setups" or said != "nothing", out)
        sync.close()
    values = {p.name: p.value.tolist() for p in params}
    (out / f"closed{sync.rank}.json").write_text(json.dumps({"said": said, "values": values}))


if __name__ == "__main__":
    main()
