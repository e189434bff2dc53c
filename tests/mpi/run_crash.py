"""mpiexec -n 2 python run_crash.py OVERLAP [ERRORS_DIR]: rank 1 raises in the middle of step
2's backward.

Run under plain ``python`` (not ``-m mpi4py``): MPISync's exception hook alone must abort the
job, while rank 0 waits in the step's allreduce. With ``ERRORS_DIR`` the failing rank also writes
its error to ``ERRORS_DIR/rank<r>.err`` first: mpiexec may drop an aborting rank's stderr when it
tears the job down; and after setup each rank lists the node's shared-memory files it maps in
``ERRORS_DIR/rank<r>.shm``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import node_segments, small_lenet, train  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402


class CrashingSync(MPISync):
    """Raises on rank 1 at the third gradient of step 2."""

    calls = 0

    def on_gradient(self, param):
        self.calls += 1
        if self.rank == 1 and self.step == 1 and self.calls % 8 == 3:
            raise RuntimeError("rank 1 fails on purpose")
        super().on_gradient(param)


def main() -> None:
    sync = CrashingSync(create_optimizer("sgd"), bucket_bytes=300, overlap=sys.argv[1] == "1")
    net = small_lenet(seed=0)
    try:  # as distconv.job.train does: close() runs before the exception reaches the hook
        sync.setup(net.parameters(), {})
        if len(sys.argv) > 2:  # the node's shared-memory files, which the abort must not leave
            # (unlinked as MPI came up: their names are read from the mappings)
            segments = Path(sys.argv[2]) / f"rank{sync.rank}.shm"
            segments.write_text("".join(f"{path}\n" for path in sorted(node_segments())))
        train(net, sync, sync.rank, sync.world_size)
    except Exception as error:
        if len(sys.argv) > 2:
            record = Path(sys.argv[2]) / f"rank{sync.rank}.err"
            record.write_text(f"{type(error).__name__}: {error}\n")
        raise
    finally:
        sync.close()


if __name__ == "__main__":
    main()
