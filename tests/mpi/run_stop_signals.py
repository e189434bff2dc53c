"""mpiexec -n 2 python -m mpi4py run_stop_signals.py OUT SIGNALS: ranks signalled mid-fit.

Trains ``small_lenet`` on 120 examples of :func:`trainer_data` (10 steps an epoch) for 2
epochs. ``SIGNALS`` lists what each rank sends itself right after its step 3, as
``RANK:NAME[+NAME]`` joined by commas (``1:SIGINT``, ``0:SIGINT,1:SIGTERM``). Each rank writes
``OUT/rank<r>.json``: the step it stopped at, and its ``Preempted``'s message and exit status
(or that it finished), then exits with that status, as the command line would.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fit_and_exit, small_lenet, trainer_data  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402
from distconv.trainer import Trainer  # noqa: E402
from tests.signals import signal_at  # noqa: E402

SIGNALLED_AFTER_STEP = 3


def main() -> None:
    out, plan = Path(sys.argv[1]), sys.argv[2]
    sync = MPISync(create_optimizer("sgd", lr=0.01))
    mine = [signal.Signals[name] for r, names in (p.split(":") for p in plan.split(",")) if
            int(r) == sync.rank for name in names.split("+")]  # fmt: skip
    trainer = Trainer(small_lenet(seed=0), sync, 6, progress=False, dtype="float64")
    signal_at(trainer, SIGNALLED_AFTER_STEP, *mine)
    fit_and_exit(trainer, sync, out, lambda: trainer.fit(trainer_data(120), epochs=2))


if __name__ == "__main__":
    main()
