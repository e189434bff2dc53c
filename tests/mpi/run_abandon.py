"""mpiexec -n 2 python -m mpi4py run_abandon.py OUT MODE: every rank abandons step 0 after one
of its two gradients fired. ``refused``: each then hands in the other gradient, finishes a step,
takes the optimizer state and starts a step, writing what each call raised (or "nothing") to
``OUT/refused<rank>.json``, and closes (which ends the job: the step stays open). ``refit``:
each sets the sync up again (a second fit), trains one step, writes ``OUT/values<rank>.npz``
and closes cleanly.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from tests.mpi.common import bucket_params, bucket_sync, open_step, step_and_save


def what_raises(call: Callable[[], object]) -> str:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - recorded for the test to judge
        return f"{type(exc).__name__}: {exc}"
    return "nothing"


def main() -> None:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    sync = bucket_sync(timeout=60)
    params = bucket_params()
    try:
        open_step(sync, params, 1.0)
        sync.abandon_step()  # as the Trainer does when a layer raises mid-backward
        if mode == "refused":
            said = {
                "gradient": what_raises(lambda: params[0].inc_update(sync)),
                "finish_step": what_raises(sync.finish_step),
                "state_dict": what_raises(sync.state_dict),  # a whole step: handed out
                "start_step": what_raises(lambda: sync.start_step(1)),
            }
            (out / f"refused{sync.rank}.json").write_text(json.dumps(said))
            return
        sync.setup(params, {})
        for p in params:
            p.grad[...] = 0
        step_and_save(sync, params, out)
    finally:
        sync.close()


if __name__ == "__main__":
    main()
