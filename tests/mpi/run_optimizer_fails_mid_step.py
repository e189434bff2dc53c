"""mpiexec -n 2 python -m mpi4py run_optimizer_fails_mid_step.py OUT OVERLAP [refit]: the
optimizer raises on the second bucket of step 1, on every rank alike.

Three parameters, a bucket each, laid out c, b, a. Each rank catches the error, then writes
``OUT/rank<r>.json``: the error, the parameters' values (c updated in steps 0 and 1, b and a
in step 0 only: the buckets before a failed update are updated), and what ``start_step`` and
``checkpoint_state`` then said; then closes its sync, which ends the job (cleanly: every
collective of the step completed on both ranks). With ``refit``, each
rank first sets up again (what a second fit does) and records what ``checkpoint_state`` and
one more step then gave, and the job ends cleanly. With ``mismatch``, each rank sets up with a
job that differs (every rank refuses it) and records what ``checkpoint_state`` and
``start_step`` then said.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync


def said(call: Any) -> str:
    """What ``call()`` raised, or ``"passed"``."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the test reads it
        return f"{type(exc).__name__}: {exc}"
    return "passed"


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    optimizer = create_optimizer("sgd", lr=0.5)
    sync = MPISync(optimizer, overlap=overlap, bucket_bytes=32, timeout=30)
    params = [Parameter(name, np.zeros(4)) for name in "abc"]
    update = optimizer.update

    def failing(value: Any, grad: Any, state: Any, grad_scale: float = 1.0) -> None:
        if sync.step == 1 and value is params[1].value:
            raise FloatingPointError("the optimizer fails on b")
        update(value, grad, state, grad_scale=grad_scale)

    optimizer.update = failing
    sync.setup(params, {})
    record: dict[str, Any] = {}
    for _ in range(2):
        sync.start_step(2)
        for p in reversed(params):
            p.grad[...] = 1.0
            sync.on_gradient(p)
        record["finish_step"] = said(sync.finish_step)
    record["values"] = {p.name: p.value.tolist() for p in params}
    record["start_step"] = said(lambda: sync.start_step(2))
    record["checkpoint_state"] = said(sync.checkpoint_state)
    if sys.argv[3:] == ["refit"]:
        refit(sync, params, record)
    elif sys.argv[3:] == ["mismatch"]:  # a setup every rank refuses: the ranks' jobs differ
        record["setup"] = said(lambda: sync.setup(params, {"rank": sync.rank}))
        record["mismatch_checkpoint_state"] = said(sync.checkpoint_state)
        record["mismatch_start_step"] = said(lambda: sync.start_step(2))
    (out / f"rank{sync.rank}.json").write_text(json.dumps(record))
    sync.close()


def refit(sync: MPISync, params: list[Parameter], record: dict[str, Any]) -> None:
    """Set up again, then record what the state and one more step give."""
    if sync.rank == 1:  # the ranks differ now: setup's broadcast makes them rank 0's again
        params[0].value[...] = 7.0
    sync.setup(params, {})
    record["refit_checkpoint_state"] = said(sync.checkpoint_state)
    record["refit_values"] = {p.name: p.value.tolist() for p in params}
    sync.start_step(2)
    for p in reversed(params):
        p.grad[...] = 1.0
        sync.on_gradient(p)
    record["refit_step"] = said(sync.finish_step)
    record["refit_stepped"] = {p.name: p.value.tolist() for p in params}


if __name__ == "__main__":
    main()
