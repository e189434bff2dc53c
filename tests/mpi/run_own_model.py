"""mpiexec -n 2 python -m mpi4py run_own_model.py OUT [--broken] [--accumulate N] [--restart]:
each rank's
share of the equivalence check on a model of one's own (``tests/own_model.py``: a layer of
one's own whose weight two layers share), ``Job(model=own_model, dataset=own_data)``, through
MPISync, as a layer's author runs it.

Each rank writes ``OUT/rank<r>.txt``: ``matches`` or the check's failure, and ends normally
either way. ``--broken`` trains the model whose first shared-weight user assigns its gradient
instead of adding it. ``--restart`` runs ``RESUMED_JOB``'s variant of the job: stopped
mid-epoch, checkpointed in ``OUT/run``, resumed by a new MPISync of each rank.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from distconv.equivalence import JOB, RESUMED_JOB, assert_rank_matches_local
from distconv.sync.mpi import MPISync
from tests.own_model import broken_model, own_data, own_model


def main() -> None:
    out = Path(sys.argv[1])
    accumulate = (
        int(sys.argv[sys.argv.index("--accumulate") + 1]) if "--accumulate" in sys.argv else 1
    )
    job = dataclasses.replace(
        RESUMED_JOB if "--restart" in sys.argv else JOB,
        model=broken_model if "--broken" in sys.argv else own_model,
        dataset=own_data,
        accumulate=accumulate,
    )
    restart = {"restart": MPISync, "out_dir": out / "run"} if job.restart_at else {}
    sync = MPISync(job.make_optimizer())
    try:
        assert_rank_matches_local(sync, job, world_size=2, **restart)
        said = "matches"
    except AssertionError as failed:
        said = str(failed)
    finally:
        sync.close()
    (out / f"rank{sync.rank}.txt").write_text(said)


if __name__ == "__main__":
    main()
