"""mpiexec -n 1 env PYTHONHASHSEED=1 python -m mpi4py run_hash_seed_job_check.py OUT : -n 1 env
PYTHONHASHSEED=2 ...: two ranks whose sets iterate in another order set up one job.

The first setup's config holds a set, the second's an object that says nothing of itself (its
default text has its address), alike on both ranks but for their hash order and their
addresses; the third's a dict of keys of mixed types and a tuple key, each rank's built in
another order (a bare TypeError at setup), beside a large array and an array of objects
holding the set (its str had the set's hash order): the job check must accept them, and a
dataclass holding the set and the array (its repr had the set's hash order). Then rank 0 alone
holds two keys one text named: the check must refuse it on both ranks, naming it (rank 0 raised
before the exchange). The last differs for real (each rank another batch size): the check must
refuse it on every rank, naming the difference. Each rank writes ``OUT/rank<r>.json``: the
order its set iterates in, and what each setup said.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync

#: layer names: their order in a set differs between PYTHONHASHSEED 1 and 2 (the test checks)
FROZEN = frozenset({"conv1", "conv2", "fc"})


class Augment:
    """A setting of one's own with no text of its own: its default one has its address."""


@dataclasses.dataclass
class Crop:
    """A dataclass in a config: its repr had its set's hash order, its array summarised."""

    skip: frozenset
    mask: np.ndarray


def setup_said(sync: MPISync, config: dict) -> str:
    """``ok`` where the job check accepted ``config``, else the refusal's message."""
    try:
        sync.setup([Parameter("w", np.zeros(3))], config)
    except SyncError as error:
        return f"{type(error).__name__}: {error}"
    return "ok"


def main() -> None:
    out = Path(sys.argv[1])
    sync = MPISync(create_optimizer("sgd"), overlap=False)
    try:
        said = {"order": list(FROZEN), "set": setup_said(sync, {"frozen": FROZEN})}
        said["object"] = setup_said(sync, {"augment": Augment()})
        # keys of mixed types and a tuple key, each rank's dict built in another order
        lr = [(1, 0.1), ("fc", 0.2), (("conv", 2), 0.3)][:: 1 - 2 * sync.rank]
        # arrays: written as a hash of their values, one of objects (a set) of their JSON text
        arrays = {"mask": np.arange(5000.0), "sets": np.array([FROZEN, None], dtype=object)}
        said["keys"] = setup_said(sync, {"lr": dict(lr), 7: "top", **arrays})
        # a dataclass holding the set: its repr wrote it in each rank's hash order
        said["dataclass"] = setup_said(sync, {"crop": Crop(FROZEN, np.arange(5000.0))})
        # rank 0 alone holds keys one text named (1, "1", "1 (int)"): its ValueError came
        # before the exchange, which rank 1 waited in (600 s where rank 0 caught it)
        pair = {1: 0, "1": 0, "1 (int)": 0} if sync.rank == 0 else {"1": 0, "1 (int)": 0}
        said["one_rank_pair"] = setup_said(sync, {"k": pair})
        config = {"frozen": FROZEN, "augment": Augment(), "batch_size": 8 * (sync.rank + 1)}
        said["differ"] = setup_said(sync, config)
        (out / f"rank{sync.rank}.json").write_text(json.dumps(said))
    finally:
        sync.close()


if __name__ == "__main__":
    main()
