"""mpiexec -n 2 python -m mpi4py run_pack_failure.py OUT OVERLAP [--interrupt] [WIRE [GRAD]]: in
step 0 only ``b`` fires (``GRAD``, 1 by default), so ``a``'s bucket is packed by
``finish_step``, and on rank 0 alone that pack raises (as a failed device copy would; with
``--interrupt``, a KeyboardInterrupt, as a SIGINT to that rank alone). Each rank writes what its
``finish_step`` raised (and its notes, a line each) to ``OUT/said<rank>.txt``, then, unless
``GRAD`` was given, sets up again, as a second fit does, and takes one last step
(:func:`~tests.mpi.common.refit_and_save`: ``OUT/values<rank>.npz``). A rank that fails
otherwise writes ``OUT/rank<r>.err``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync
from distconv.sync.mpi.buckets import Bucket
from tests.mpi.common import bucket_params, bucket_sync, fire, recorded, refit_and_save


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    interrupt = "--interrupt" in sys.argv[3:]
    rest = [arg for arg in sys.argv[3:] if arg != "--interrupt"]
    wire = rest[0] if rest else None
    grad = float(rest[1]) if len(rest) > 1 else None
    sync, params = bucket_sync(overlap=overlap, grad_dtype=wire, timeout=20), bucket_params()
    if sync.rank == 0:
        fail_first_pack(sync, "a", KeyboardInterrupt if interrupt else RuntimeError)
    with recorded(sync, out):
        sync.setup(params, {})
        sync.start_step(1)
        fire(sync, params[1], grad or 1.0)  # a never fires: its bucket is packed in finish_step
        said = "nothing"
        try:
            sync.finish_step()
        except (SyncError, RuntimeError, KeyboardInterrupt) as exc:
            said = "\n".join([f"{type(exc).__name__}: {exc}", *getattr(exc, "__notes__", [])])
        (out / f"said{sync.rank}.txt").write_text(said)
        sync.abandon_step()  # as Trainer.fit does after a failed step (here a no-op)
        if grad is None:
            refit_and_save(sync, params, out)


def fail_first_pack(sync: MPISync, name: str, error: type[BaseException] = RuntimeError) -> None:
    """Make the first pack of the bucket holding ``name`` raise ``error`` (this process)."""
    pack, failed = Bucket.pack, []

    def failing(bucket: Bucket, scale: float = 1.0) -> None:
        if not failed and bucket.params[0].name == name:
            failed.append(True)
            raise error(f"copying bucket {bucket.index} to the host failed")
        pack(bucket, scale)

    Bucket.pack = failing  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
