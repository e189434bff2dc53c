"""mpiexec -n 2 python -m mpi4py run_param_changes.py OUT MODE OVERLAP [watch]: parameters
that change between steps, or fire on some ranks only, against one process (``LocalSync``)
with every rank's examples; ``watch`` logs every MPI call (``OUT/calls<rank>.json``).

MODE: ``freeze`` (b frozen for step 1, trained again from step 2), ``toggle`` (b frozen and
unfrozen before step 2: its gradient is a new array), ``swap`` (b frozen from step 0; before
step 2, a frozen and b trained again: as many trained parameters as before, so only their
gradient arrays tell the layout is stale), ``unused (c fires on every rank, on
rank 1 only, or on no rank, by step), ``order`` (each rank fires its gradients in its own
order, the first step included), ``replaced`` (b's gradient is replaced by a new array,
``p.grad = p.grad + g``, where the contract says ``+=``), ``late`` (b's gradient replaced
after it fired: the job must end naming it), ``fewer`` (rank 1 stops a step early: the job
must end with a message, not hang), ``preempted`` (rank 0 stops with
``Preempted``: the job's exit status must be 143), ``midstep``, ``thread``, ``optimizer`` and
``closed`` (a rank catches an error and closes its sync normally: see :func:`go_wrong`). Each
rank saves its values to ``OUT/values<rank>.npz``; a rank that fails writes its error to
``OUT/rank<r>.err`` first.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.resume import Preempted
from distconv.sync.base import SyncError, SyncStrategy
from tests.mpi.common import recorded
from tests.mpi.one_call_at_a_time import OneCallAtATime

if TYPE_CHECKING:
    from distconv.sync.mpi import MPISync

STEPS = 4
#: moves a parameter on a zero gradient (its velocity), and unlike Adam is not blind to the
#: scale of the gradients (a rank's own instead of the ranks' sum would show)
OPTIMIZER = "momentum"
#: each parameter's gradient pattern (different per parameter, so a swap would show)
SCALE = {"a": 1.0, "b": -0.5, "c": 2.0}


def make_params() -> list[Parameter]:
    return [Parameter(n, np.linspace(0.1, 0.9, 3) * (i + 1)) for i, n in enumerate("abc")]


def fires(mode: str, step: int, rank: int, name: str) -> bool:
    """Whether ``name`` fires on ``rank`` at ``step``."""
    if mode == "unused" and name == "c":
        return {0: True, 1: rank == 1, 2: True, 3: False}[step]
    return True


def gradient(step: int, rank: int, name: str) -> np.ndarray:
    return (step + 1) * (1 + 2 * rank) * SCALE[name] * np.arange(1.0, 4.0)


def change(mode: str, step: int, params: dict[str, Parameter]) -> None:
    """What happens to the parameters before ``step``."""
    if mode == "freeze" and step in (1, 2):
        params["b"].set_static(step == 1)
    if mode == "toggle" and step == 2:  # after the first step's order has been laid out
        params["b"].set_static(True)
        params["b"].set_static(False)
    if mode == "swap" and step in (0, 2):
        params["b"].set_static(step == 0)
        params["a"].set_static(step == 2)


def run(sync: SyncStrategy, mode: str, ranks: list[int], steps: int = STEPS) -> dict:
    """Train ``steps`` steps; this process does the work of ``ranks`` (all of them: the
    single-process reference, which sums their gradients)."""
    params = {p.name: p for p in make_params()}
    sync.setup(list(params.values()), {})
    for step in range(steps):
        change(mode, step, params)
        sync.start_step(len(ranks))
        names = "cba" if mode == "order" and ranks[0] % 2 else "abc"
        for name in names:
            p = params[name]
            firing = [r for r in ranks if fires(mode, step, r, name)]
            if p.static or not firing:
                continue
            for r in firing:
                if mode == "replaced" and name == "b":
                    p.grad = p.grad + gradient(step, r, name)
                else:
                    p.grad += gradient(step, r, name)
            p.inc_update(sync)
            if mode == "late" and name == "b":  # the sync's until finish_step returns
                p.grad = p.grad * 1.0
        sync.finish_step()
    return {n: p.value.copy() for n, p in params.items()}


#: modes where one rank catches an error and closes its sync normally (see go_wrong)
CAUGHT = ("midstep", "thread", "optimizer", "closed", "setup", "mismatch")
#: the ranks that catch the error in each of those modes (default: rank 1)
CATCHING = {"closed": (0, 1), "setup": (0,), "mismatch": (0, 1)}


def go_wrong(sync: MPISync, mode: str) -> None:
    """A step goes wrong and a rank catches the error, then closes its sync (no exception
    propagates): ``midstep``: rank 1 abandons step 1 after ``start_step``; ``thread``: rank
    1's communication thread's first allreduce of step 1 raises (``finish_step`` raises a
    ``SyncError``); ``optimizer``: rank 1's optimizer raises in the first ``finish_step``,
    once that step's collectives completed (rank 0 finishes it and goes on); ``closed``: rank
    1 closes after step 0, and rank 0's step 1 fires nothing, so its ``finish_step`` is where
    it learns; ``setup``: rank 0's checkpoint state names a parameter that does not exist, and
    its setup raises before the broadcast. The other rank waits for collectives that never
    come: the job must end, naming why. ``mismatch``: the ranks' seeds differ; every rank's
    setup raises alike, and nobody waits, so every rank closes cleanly."""
    from distconv.sync.mpi.buckets import Bucket

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("failed on purpose")

    params = make_params()
    if mode in ("setup", "mismatch"):
        state = {"nowhere": {"velocity": np.zeros(3)}} if mode == "setup" else None
        try:
            sync.setup(params, {"seed": sync.rank} if mode == "mismatch" else {}, state)
        except Exception as exc:  # noqa: BLE001 - whatever setup raised: caught, on purpose
            print(f"rank {sync.rank} caught {exc!r}", file=sys.stderr, flush=True)
        return
    sync.setup(params, {})
    one = sync.rank == 1
    for step in range(1 if mode == "closed" and one else 2):
        sync.start_step(1)
        if one and step == 1 and mode == "midstep":
            return
        if one and step == 1 and mode == "thread":
            Bucket.reduce_on_thread = fail
        if one and mode == "optimizer":
            sync.optimizer.update = fail
        for p in params if not (mode == "closed" and step == 1) else []:
            p.grad += gradient(step, sync.rank, p.name)
            p.inc_update(sync)
        try:
            sync.finish_step()
        except (SyncError, RuntimeError) as exc:
            print(f"rank {sync.rank} caught {exc}", file=sys.stderr, flush=True)
            return


def main() -> None:
    from distconv.sync.mpi import MPISync

    out, mode, overlap = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    comm = watched_world() if sys.argv[4:] == ["watch"] else None
    sync = MPISync(create_optimizer(OPTIMIZER, lr=0.1), comm=comm, overlap=overlap, bucket_bytes=48)
    if mode in CAUGHT and sync.rank in CATCHING.get(mode, (1,)):
        go_wrong(sync, mode)
        # mpiexec may drop an aborting rank's stderr; nothing propagates: close alone ends the job
        with open(out / f"rank{sync.rank}.err", "w") as err, contextlib.redirect_stderr(err):
            sync.close()
        return
    with recorded(sync, out):
        steps = STEPS - (mode == "fewer" and sync.rank == 1)
        values = run(sync, mode, [sync.rank], steps)
        if mode == "preempted" and sync.rank == 0:
            raise Preempted("stopped by SIGTERM (on purpose)")
    np.savez(out / f"values{sync.rank}.npz", **values)
    if comm is not None:
        log = {"by_thread": dict(comm.log.by_thread), "overlaps": comm.log.overlaps}
        (out / f"calls{sync.rank}.json").write_text(json.dumps(log))


def watched_world() -> OneCallAtATime:
    """``COMM_WORLD``, every MPI call through it (and its duplicates and requests) logged."""
    from mpi4py import MPI

    return OneCallAtATime(MPI.COMM_WORLD)


if __name__ == "__main__":
    main()
