"""mpiexec -n 2 python -m mpi4py run_straggler.py OUT OVERLAP SLEEP: rank 1 a straggler.

Trains ``small_lenet`` in float64 with SGD on 37 examples of :func:`trainer_data` for one epoch,
2 examples a rank a step (10 steps), reporting to a monitor (a ``ServiceEndpoints``, not served:
its histogram is read here). Rank 1 sleeps ``SLEEP`` seconds at the start of each step, before
its step check is posted, so rank 0 waits for it in that check. Each rank writes
``OUT.<rank>.json``: its ``traffic()["sync_seconds"]``, what its monitor served of the step
syncs' histogram (``distconv_allreduce_seconds_sum``), the fit's wall time, its steps and the
seconds it slept.
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

    def train_step(self, arrays, passes):
        time.sleep(self.sleep)
        self.slept += self.sleep
        return super().train_step(arrays, passes)


def main() -> None:
    out, overlap, sleep = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3])
    sync = MPISync(create_optimizer("sgd", lr=0.01), overlap=overlap)
    monitor = ServiceEndpoints(role="worker", rank=sync.rank)
    try:
        trainer = Straggler(small_lenet(seed=0), sync, 2, progress=False, monitor=monitor)
        trainer.sleep = sleep if sync.rank == 1 else 0.0
        began = time.perf_counter()
        trainer.fit(trainer_data(37), epochs=1)
        fit_seconds = time.perf_counter() - began
    finally:
        sync.close()
    labels = {"role": "worker", "rank": str(sync.rank)}
    served = monitor.registry.get_sample_value("distconv_allreduce_seconds_sum", labels)
    said = {
        "sync_seconds": sync.traffic()["sync_seconds"],
        "served": served,
        "fit_seconds": fit_seconds,
        "steps": sync.step,
        "slept": trainer.slept,
    }
    Path(f"{out}.{sync.rank}.json").write_text(json.dumps(said))


if __name__ == "__main__":
    main()
