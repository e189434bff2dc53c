"""mpiexec -n N python -m mpi4py run_evaluate.py OUT HANDED: the Trainer over MPI evaluates a
test set after one epoch; rank 0 writes the result to ``OUT`` (JSON).

``HANDED`` is ``whole`` (every rank handed the whole set, as it must be), ``cast`` (the whole
set in values float32 holds, rank 1's images in float32: the same set once the float64 trainer
casts them) or ``shard``
(each rank handed its own contiguous shard of it, of equal lengths, as Horovod scripts do).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import small_lenet, trainer_data  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402
from distconv.trainer import Trainer  # noqa: E402


def main() -> None:
    out, handed = Path(sys.argv[1]), sys.argv[2]
    sync = MPISync(create_optimizer("adam", lr=0.01))
    try:
        trainer = Trainer(small_lenet(seed=0), sync, 4, progress=False, dtype="float64")
        trainer.fit(trainer_data(24), epochs=1)
        test = trainer_data(40, seed=5)
        if handed == "cast":  # values float32 holds, in float32 on rank 1 alone
            test["image"] = test["image"].astype("float32")
            test["image"] = test["image"].astype("float64" if sync.rank == 0 else "float32")
        if handed == "shard":  # rank r: rows [20r, 20r + 20)
            test = {k: v[20 * sync.rank : 20 * sync.rank + 20] for k, v in test.items()}
        result = trainer.evaluate(test)
    finally:
        sync.close()
    if sync.rank == 0:
        out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
