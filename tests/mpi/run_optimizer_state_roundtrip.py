"""mpiexec -n 2 python -m mpi4py run_optimizer_state_roundtrip.py OUT OPTIMIZER: MPISync trains
the small LeNet, rank 0 saves its optimizer state with save_checkpoint (which checks it) and
restores it into a fresh LocalSync's; prints "same" where every array came back bit for bit."""

from __future__ import annotations

import sys
from pathlib import Path

from distconv.checkpoint import restore_checkpoint, save_checkpoint
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync
from tests.mpi.common import small_lenet, train


def main() -> None:
    out, name = Path(sys.argv[1]), sys.argv[2]
    net, sync = small_lenet(0), MPISync(create_optimizer(name))
    sync.setup(net.parameters(), {})
    train(net, sync, sync.rank, sync.world_size)
    state = sync.state_dict() if sync.rank == 0 else None  # the chief alone, as a save
    sync.close()
    if state is None:
        return
    save_checkpoint(out / "ckpt.safetensors", net.parameters(), state, step=4)
    fresh_net, fresh = small_lenet(1), LocalSync(create_optimizer(name))
    fresh.setup(fresh_net.parameters(), {})
    restore_checkpoint(out / "ckpt.safetensors", fresh_net.parameters(), fresh.state)
    same = all(
        fresh.state[n][k].dtype == v.dtype and fresh.state[n][k].tobytes() == v.tobytes()
        for n, s in state.items()
        for k, v in s.items()
    ) and all(
        q.value.tobytes() == p.value.tobytes()
        for p, q in zip(net.parameters(), fresh_net.parameters())
    )
    print("same" if same and any(s for s in state.values()) else "differ")


if __name__ == "__main__":
    main()
