"""mpiexec -n 2 python -m mpi4py run_check_interrupt.py OUT OVERLAP WHERE: a KeyboardInterrupt
on rank 0 alone right after its step check's Wait returned (as a SIGINT that arrived during the
Wait is raised once Python runs again), in step 0.

``WHERE`` is ``finish``: only ``a`` fires (bucket 1), so bucket 0 (``b``) is never launched
during backward and the check is completed at the head of ``finish_step``, where rank 0 is
interrupted; or ``launch``: only ``b`` fires, launching bucket 0 from ``on_gradient``, where
rank 0 is interrupted (it then abandons the step, as ``Trainer.fit`` does, without
``finish_step``). Rank 1 always calls ``finish_step``.

Each rank writes what its step raised to ``OUT/said<rank>.txt`` (``nothing`` where nothing
was), abandons the step, then sets up again as a second fit does, and takes one last step
(:func:`~tests.mpi.common.refit_and_save`: ``OUT/values<rank>.npz``); a SyncError from that
setup is written to ``OUT/setup<rank>.txt`` instead. A rank that fails otherwise writes
``OUT/rank<r>.err``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync
from distconv.sync.mpi.step_check import StepCheck
from tests.mpi.common import bucket_params, bucket_sync, fire, recorded, refit_and_save


def main() -> None:
    out, overlap, where = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
    sync, params = bucket_sync(overlap=overlap, timeout=20), bucket_params()
    with recorded(sync, out):
        sync.setup(params, {})
        if sync.rank == 0:
            interrupt_first_drain()
        sync.start_step(1)
        a, b = params
        said = what_raises(lambda: step(sync, a if where == "finish" else b))
        (out / f"said{sync.rank}.txt").write_text(said)
        sync.abandon_step()  # as Trainer.fit does after a failed step
        try:
            refit_and_save(sync, params, out)
        except SyncError as exc:
            (out / f"setup{sync.rank}.txt").write_text(f"{type(exc).__name__}: {exc}")


def step(sync: MPISync, param: Parameter) -> None:
    """Fire ``param``, then ``finish_step`` (an interrupt in ``fire`` ends the step there)."""
    fire(sync, param, 1.0)
    sync.finish_step()


def what_raises(call: Callable[[], None]) -> str:
    """``call``'s SyncError or KeyboardInterrupt as ``Type: message``, or ``nothing``."""
    try:
        call()
    except (SyncError, KeyboardInterrupt) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "nothing"


def interrupt_first_drain() -> None:
    """The next :meth:`StepCheck.drain` (this process) waits as usual, then raises a
    KeyboardInterrupt, as a SIGINT reaching this rank during that Wait would."""
    drain, raised = StepCheck.drain, []

    def interrupted(check: StepCheck) -> bool:
        pending = drain(check)
        if not raised:
            raised.append(True)
            raise KeyboardInterrupt("Ctrl-C in the step check")
        return pending

    StepCheck.drain = interrupted  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
