"""mpiexec -n N python -m mpi4py run_equivalence.py OUT OVERLAP [--no-broadcast]
[--no-state-broadcast] [--restart]: each rank's share of the equivalence check
(:func:`distconv.equivalence.assert_rank_matches_local`) with MPISync, as a transport's author
runs it under the transport's own launcher.

Each rank writes ``OUT/rank<r>.txt``: ``matches`` or the check's failure, and ends normally
either way (an error would abort the job, and mpiexec may drop an aborting rank's output).
``--restart`` then runs the check again with a restart in the middle (``RESUMED_JOB``: stopped
mid-epoch, checkpointed in ``OUT/run``, resumed by a new MPISync of each rank) and writes its
answer to ``OUT/rank<r>-restart.txt``. ``--no-broadcast`` leaves out MPISync's broadcast at
setup, ``--no-state-broadcast`` only that of the optimizer state: faults the check must name
(the second after a restart alone).
"""

from __future__ import annotations

import sys
from pathlib import Path

from distconv.equivalence import JOB, RESUMED_JOB, Job, assert_rank_matches_local
from distconv.sync.mpi import MPISync


class NoBroadcast(MPISync):
    """MPISync whose ranks each keep the weights they drew."""

    def broadcast_parameters(self) -> None:
        pass


class NoStateBroadcast(MPISync):
    """MPISync that broadcasts rank 0's parameters but not its optimizer state: each rank
    keeps its own, zeros on all but a resumed rank 0, which loaded the checkpoint's."""

    def broadcast_parameters(self) -> None:
        state, self.state = self.state, {name: {} for name in self.state}
        try:
            super().broadcast_parameters()
        finally:
            self.state = state


def check(kind: type[MPISync], overlap: bool, job: Job, out: Path) -> tuple[int, str]:
    """This rank's share of the check on ``job``: its rank and what the check said."""

    def make(optimizer):
        return kind(optimizer, overlap=overlap, bucket_bytes=300)

    sync = make(job.make_optimizer())
    restart = {"restart": make, "out_dir": out / "run"} if job.restart_at else {}
    try:
        assert_rank_matches_local(sync, job, **restart)
        said = "matches"
    except AssertionError as failed:
        said = str(failed)
    finally:
        sync.close()
    return sync.rank, said


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    kind = NoBroadcast if "--no-broadcast" in sys.argv else MPISync
    kind = NoStateBroadcast if "--no-state-broadcast" in sys.argv else kind
    rank, said = check(kind, overlap, JOB, out)
    (out / f"rank{rank}.txt").write_text(said)
    if "--restart" in sys.argv:
        rank, said = check(kind, overlap, RESUMED_JOB, out)
        (out / f"rank{rank}-restart.txt").write_text(said)


if __name__ == "__main__":
    main()
