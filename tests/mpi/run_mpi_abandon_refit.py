"""mpiexec -n 2 python -m mpi4py run_mpi_abandon_refit.py OUT OVERLAP [GRAD_DTYPE]: a second fit
after a step that rank 1 abandoned once its first bucket was on the wire, while rank 0 finished
it.

Two parameters in two buckets (``b``'s first). Both fire ``b``; rank 1 then raises (as a layer
would) and abandons the step, rank 0 fires ``a`` and calls ``finish_step``, which fails ("another
rank abandoned the step") and counts the step, where rank 1 counted none. Both set the sync up
again, as ``Trainer.fit`` does. Each rank writes what its ``finish_step`` (rank 0), a
``start_step`` before the second setup and that setup raised to ``OUT/finish<rank>.txt``,
``OUT/start<rank>.txt`` and ``OUT/setup<rank>.txt`` (``ok`` where nothing was raised), and
what a ``start_step`` after that refused setup raised to ``OUT/after<rank>.txt``, rank 0 its
values after ``finish_step`` to ``OUT/finish0.npz``, then closes. ``GRAD_DTYPE``: the wire (the
sync's default when not given).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync
from distconv.sync.mpi.comm import JobMismatch
from tests.mpi.run_abandon import what_raises


def said(call: Callable[[], None], path: Path) -> None:
    """Run ``call``; write ``ok`` or its SyncError to ``path``, and raise it on."""
    try:
        call()
    except SyncError as exc:
        path.write_text(f"{type(exc).__name__}: {exc}")
        raise
    path.write_text("ok")


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    wire = {"grad_dtype": sys.argv[3]} if len(sys.argv) > 3 else {}
    optimizer = create_optimizer("sgd", lr=0.5)
    sync = MPISync(optimizer, bucket_bytes=24, overlap=overlap, timeout=20, **wire)
    params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("ab")]
    rank = sync.rank
    try:
        sync.setup(params, {})
        sync.start_step(1)
        params[1].grad += 1.0
        params[1].inc_update(sync)  # bucket 0 ('b') goes on the wire on both ranks
        if rank == 0:
            params[0].grad += 1.0
            params[0].inc_update(sync)
            try:
                said(sync.finish_step, out / "finish0.txt")
            except SyncError:
                pass
            np.savez(out / "finish0.npz", **{p.name: p.value for p in params})
        sync.abandon_step()  # rank 1's layer raised (rank 0: nothing to abandon)
        try:  # what the refusal advises: a setup, unless ranks counted the step apart
            sync.start_step(1)
        except SyncError as exc:
            (out / f"start{rank}.txt").write_text(f"{type(exc).__name__}: {exc}")
        for p in params:
            p.zero_grad()
        try:
            said(lambda: sync.setup(params, {}), out / f"setup{rank}.txt")
        except JobMismatch:  # then a step: it ran on the old layout (the next check refused it)
            (out / f"after{rank}.txt").write_text(what_raises(lambda: sync.start_step(1)))
            raise  # close ends cleanly after a JobMismatch: every rank raised it alike
    finally:
        sync.close()


if __name__ == "__main__":
    main()
