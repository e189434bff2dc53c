"""mpiexec -n N python -m mpi4py run_trainer.py OUT OVERLAP EPOCHS EXAMPLES [RUN_DIR]: the
Trainer over MPI.

Trains ``small_lenet`` in float64 with Adam on ``EXAMPLES`` of :func:`trainer_data`, 2 examples
a rank a pass, 3 passes a step (a global batch of 12), so the last step is short: with 37
examples neither rank has anything in its last pass, with 45 rank 0 has one example there and
rank 1 none (its gradients go from ``fire_every_gradient`` while rank 0's come from backward). With
``RUN_DIR`` it checkpoints every 2 steps there and resumes from what it finds. Rank 0 saves the
parameters to ``OUT`` (.npz), the run's steps so far as ``_steps`` (the sync's count: after a
resume, from the checkpoint's step), and the epochs this job ran as ``_epochs``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from common import small_lenet, trainer_data, weights  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402
from distconv.trainer import Trainer  # noqa: E402


def main() -> None:
    out, overlap, epochs = Path(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
    examples = int(sys.argv[4])
    run_dir = sys.argv[5] if len(sys.argv) > 5 else None
    net = small_lenet(seed=0)
    sync = MPISync(create_optimizer("adam", lr=0.01), bucket_bytes=300, overlap=overlap)
    try:
        trainer = Trainer(
            net,
            sync,
            2,
            accumulate=3,
            progress=False,
            dtype="float64",
            out_dir=run_dir,
            checkpoint_every=2 if run_dir else 0,
        )
        trainer.fit(trainer_data(examples), epochs=epochs, resume="auto" if run_dir else False)
    finally:
        sync.close()
    if sync.rank == 0:  # with the run's steps, and the epochs this job ran (a resumed one's: 1)
        steps, epochs = np.array(sync.step), np.array(len(trainer.history))
        np.savez(out, **weights(net), _steps=steps, _epochs=epochs)


if __name__ == "__main__":
    main()
