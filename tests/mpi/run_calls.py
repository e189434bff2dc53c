"""mpiexec -n 2 python -m mpi4py run_calls.py OUT: which communicator methods MPISync calls.

Trains a few steps in each configuration (with and without the communication thread, float32
and float16 on the wire), sums metrics, meets at a barrier and closes, on a communicator that
records every name looked up on it or on its duplicates, under the watchdog's wrapper. Rank 0
writes the names, one per line, to ``OUT``: the watchdog watches a fixed list of collectives,
and a test checks that nothing MPISync calls has been left off it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import small_lenet, train  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import MPISync, import_mpi  # noqa: E402


class Names:
    """A communicator that adds every attribute name looked up on it to ``seen``."""

    def __init__(self, comm: Any, seen: set[str]) -> None:
        self._comm, self._seen = comm, seen

    def __getattr__(self, name: str) -> Any:
        self._seen.add(name)
        attr = getattr(self._comm, name)
        if name == "Dup":  # a duplicate records into the same set
            return lambda *args: Names(attr(*args), self._seen)
        return attr


def main() -> None:
    seen: set[str] = set()
    world = import_mpi().COMM_WORLD
    for overlap in (False, True):
        for grad_dtype in (None, "float16"):
            comm = Names(world, seen)
            sync = MPISync(
                create_optimizer("adam"),
                comm=comm,
                bucket_bytes=300,
                overlap=overlap,
                grad_dtype=grad_dtype,
            )
            net = small_lenet(seed=0)
            sync.setup(net.parameters(), {})
            train(net, sync, sync.rank, sync.world_size)
            sync.allreduce_sum([1.0])
            sync.barrier()
            sync.close()
    if world.Get_rank() == 0:
        Path(sys.argv[1]).write_text("\n".join(sorted(seen)) + "\n")


if __name__ == "__main__":
    main()
