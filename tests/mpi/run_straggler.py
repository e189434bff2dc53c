"""mpiexec -n 2 python -m mpi4py run_straggler.py OUT OVERLAP SLEEP WHERE: rank 1 a straggler.

Trains ``small_lenet`` in float64 with SGD on 37 examples of :func:`trainer_data` for one epoch,
2 examples a rank a step (10 steps), reporting to a monitor (a ``ServiceEndpoints``, not served:
its histograms are read here). Rank 1 sleeps ``SLEEP`` seconds at the start of each step, before
its step check is posted, so rank 0 waits for it in that check: in backward (``WHERE`` is
``backward``), or at the head of ``finish_step`` (``finish``: no pass runs, so no gradient is
handed over and no bucket goes before ``finish_step``). Each rank writes ``OUT.<rank>.json``:
its ``traffic()["sync_seconds"]``, what its monitor served of the step syncs' histogram
(``distconv_allreduce_seconds``' sum and count) and of the steps' (``distconv_step_seconds``:
each from before ``start_step`` to after ``finish_step``, the sleep outside it), the fit's wall
time, its steps and the seconds it slept.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import small_lenet, trainer_data  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.service import ServiceEndpoints  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402
from distconv.trainer import Trainer  # noqa: E402


class Straggler(Trainer):
    """A Trainer that sleeps ``sleep`` seconds before each step it starts."""

    sleep = slept = 0.0
    no_passes = False

    def train_step(self, arrays, passes):
        time.sleep(self.sleep)
        self.slept += self.sleep
        return super().train_step(arrays, passes)

    def _passes(self, arrays, passes, counts):
        if self.no_passes:  # no gradient in the step: its check completes in finish_step
            return 0.0, 0
        return super()._passes(arrays, passes, counts)


def main() -> None:
    out, overlap, sleep, where = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3]), sys.argv[4]
    sync = MPISync(create_optimizer("sgd", lr=0.01), overlap=overlap)
    monitor = ServiceEndpoints(role="worker", rank=sync.rank)
    try:
        trainer = Straggler(small_lenet(seed=0), sync, 2, progress=False, monitor=monitor)
        trainer.sleep = sleep if sync.rank == 1 else 0.0
        trainer.no_passes = where == "finish"
        began = time.perf_counter()
        trainer.fit(trainer_data(37), epochs=1)
        fit_seconds = time.perf_counter() - began
    finally:
        sync.close()
    labels = {"role": "worker", "rank": str(sync.rank)}
    served = {
        f"{name}_{part}": monitor.registry.get_sample_value(f"distconv_{name}_{part}", labels)
        for name in ("allreduce_seconds", "step_seconds")
        for part in ("sum", "count")
    }
    said = {
        "sync_seconds": sync.traffic()["sync_seconds"],
        **served,
        "fit_seconds": fit_seconds,
        "steps": sync.step,
        "slept": trainer.slept,
    }
    Path(f"{out}.{sync.rank}.json").write_text(json.dumps(said))


if __name__ == "__main__":
    main()
