"""mpiexec -n 2 python -m mpi4py run_wait_interrupt.py OUT WHAT: a KeyboardInterrupt on rank 0
alone right after the first Wait of a request named ``... WHAT ...`` returned (as a
SIGINT that arrived during that Wait is raised once Python runs again), inside step 0's
``finish_step`` with no communication thread: ``WHAT`` is ``Iallreduce on the gradients`` (a
gradient piece's blocking Wait, :meth:`~distconv.sync.mpi.pieces.PiecePump.finish`) or
``Iallreduce on the job`` (the used-parameter flags' Wait,
:meth:`~distconv.sync.mpi.used.UsedParams.complete`). With the communication thread (``WHAT``
``thread wait`` or ``thread finish``), the main thread's first wait on the thread for a bucket
(:meth:`~distconv.sync.mpi.thread.CommThread.wait`) or for the flags
(:meth:`~distconv.sync.mpi.thread.CommThread.finish`) raises it instead, once it has returned.

Only ``a`` fires, so both buckets go in ``finish_step``. Each rank writes what its step raised
to ``OUT/said<rank>.txt`` (``nothing`` where nothing was), abandons the step, as ``Trainer.fit``
does after a failed one, then sets up again and takes one last step
(:func:`~tests.mpi.common.refit_and_save`: ``OUT/values<rank>.npz``); a SyncError from that
setup is written to ``OUT/setup<rank>.txt`` instead. A rank that fails otherwise writes
``OUT/rank<r>.err``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from distconv.sync.base import SyncError
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.watchdog import WatchedRequest
from tests.mpi.common import bucket_params, bucket_sync, recorded, refit_and_save
from tests.mpi.run_check_interrupt import step, what_raises


def main() -> None:
    out, what = Path(sys.argv[1]), sys.argv[2]
    on_thread = what.startswith("thread ")
    sync, params = bucket_sync(overlap=on_thread, timeout=8), bucket_params()
    with recorded(sync, out):
        sync.setup(params, {})
        if sync.rank == 0 and on_thread:
            interrupt_first_call(CommThread, what.removeprefix("thread "))
        elif sync.rank == 0:
            interrupt_first_wait(what)
        sync.start_step(1)
        said = what_raises(lambda: step(sync, params[0]))
        (out / f"said{sync.rank}.txt").write_text(said)
        sync.abandon_step()
        try:
            refit_and_save(sync, params, out)
        except SyncError as exc:
            (out / f"setup{sync.rank}.txt").write_text(f"{type(exc).__name__}: {exc}")


def interrupt_first_wait(what: str) -> None:
    """The next Wait (this process) of a request whose name holds ``what`` waits as usual,
    then raises a KeyboardInterrupt naming it, as a SIGINT reaching this rank there would."""
    wait, raised = WatchedRequest.Wait, []

    def interrupted(request: WatchedRequest) -> None:
        wait(request)
        if not raised and what in request._what:
            raised.append(True)
            raise KeyboardInterrupt(request._what)

    WatchedRequest.Wait = interrupted  # type: ignore[method-assign]


def interrupt_first_call(owner: type, name: str) -> None:
    """The next call (this process) of ``owner.name`` waits as usual, then raises a
    KeyboardInterrupt naming it, as a SIGINT reaching the main thread there would."""
    call, raised = getattr(owner, name), []

    def interrupted(*args: object) -> None:
        call(*args)
        if not raised:
            raised.append(True)
            raise KeyboardInterrupt(f"CommThread.{name}")

    setattr(owner, name, interrupted)


if __name__ == "__main__":
    main()
