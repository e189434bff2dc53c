"""mpiexec -n 1 python -m mpi4py run_identity.py OUT : -n 1 env PYTHONPATH=COPY:... (same): two
ranks, each maybe running another copy of distconv's source, set up one MPISync (timeout 20 s).

Each rank logs its warnings to ``OUT/log<rank>.txt``; an error is written to
``OUT/rank<rank>.err`` (:func:`~common.recorded`) and raised (the close then aborts the job).
Set up, the ranks take one step (every gradient ``rank + 1``) and save their values
(:func:`~common.step_and_save`), and each writes the build it runs to ``OUT/build<rank>.txt``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bucket_params, bucket_sync, recorded, step_and_save  # noqa: E402

import distconv  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1])
    sync = bucket_sync(overlap=False, timeout=20.0)
    (out / f"build{sync.rank}.txt").write_text(distconv.build_id())
    logging.basicConfig(filename=out / f"log{sync.rank}.txt", level=logging.WARNING)
    params = bucket_params()
    with recorded(sync, out):
        sync.setup(params, {})
        step_and_save(sync, params, out)


if __name__ == "__main__":
    main()
