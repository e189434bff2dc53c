"""mpiexec -n N python -m mpi4py run_collective_totals.py OUT RUN_DIR: the Trainer over MPI
reporting to a monitor (a ``ServiceEndpoints``, not served: its counters are read here).

Trains ``small_lenet`` in float64 with Adam on 37 examples of :func:`trainer_data` for 2 epochs,
2 examples a rank a step, into ``RUN_DIR``. Each rank writes ``OUT.<rank>.json``: its sync's
``traffic()`` after the fit, what its monitor served of the waits in collectives
(``distconv_collective_seconds_total``) and of the step syncs' histogram (its sample count), and
the steps it ran.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import small_lenet, trainer_data  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.service import ServiceEndpoints  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402
from distconv.trainer import Trainer  # noqa: E402


def main() -> None:
    out, run_dir = sys.argv[1], sys.argv[2]
    sync = MPISync(create_optimizer("adam", lr=0.01), overlap=False)
    monitor = ServiceEndpoints(role="worker", rank=sync.rank)
    try:
        trainer = Trainer(
            small_lenet(seed=0),
            sync,
            2,
            progress=False,
            dtype="float64",
            out_dir=run_dir if sync.rank == 0 else None,
            monitor=monitor,
        )
        trainer.fit(trainer_data(37), epochs=2)
    finally:
        sync.close()
    labels = {"role": "worker", "rank": str(sync.rank)}
    served = monitor.registry.get_sample_value("distconv_collective_seconds_total", labels)
    samples = monitor.registry.get_sample_value("distconv_allreduce_seconds_count", labels)
    said = {"traffic": sync.traffic(), "served": served, "samples": samples, "steps": sync.step}
    Path(f"{out}.{sync.rank}.json").write_text(json.dumps(said))


if __name__ == "__main__":
    main()
