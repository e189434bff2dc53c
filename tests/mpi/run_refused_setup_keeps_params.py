"""Under ``mpiexec -n 2``: a setup every rank refuses (a JobMismatch) leaves the parameters of
the last setup that succeeded in the sync.

Each rank sets up ``a`` (rank 1's values differ; the broadcast makes them rank 0's), then sets
up a parameter ``b`` whose shape differs per rank (refused alike on both ranks), then calls
``broadcast_parameters``, a collective between steps, then the barrier and a metrics sum. Each
rank writes to ``OUT/rank<rank>.json`` what the refused setup, the broadcast and the barrier
raised, the sum, the sync's parameters' names and ``a``'s values after rank 1 changed its own,
then closes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync
from tests.mpi.run_abandon import what_raises


def main() -> None:
    out = Path(sys.argv[1])
    sync = MPISync(create_optimizer("sgd", lr=0.5), bucket_bytes=24, overlap=False, timeout=20)
    a = Parameter("a", np.arange(3.0))
    record: dict[str, object] = {}
    try:
        sync.setup([a], {})
        a.value[:] += sync.rank  # rank 1's own values, which the broadcast replaces
        refused = [Parameter("b", np.zeros(3 + sync.rank))]  # the ranks' jobs differ
        record["setup"] = what_raises(lambda: sync.setup(refused, {}))
        record["params"] = [p.name for p in sync.params]
        record["broadcast"] = what_raises(sync.broadcast_parameters)
        record["barrier"] = what_raises(sync.barrier)  # meetings go on too (the contract)
        record["sum"] = sync.allreduce_sum([sync.rank + 1.0])
        record["a"] = a.value.tolist()
    finally:
        (out / f"rank{sync.rank}.json").write_text(json.dumps(record))
        sync.close()


if __name__ == "__main__":
    main()
