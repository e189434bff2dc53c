"""mpiexec -n N python -m mpi4py run_equivalence.py OUT OVERLAP [--no-broadcast]: each rank's
share of the equivalence check (:func:`distconv.equivalence.assert_rank_matches_local`) with
MPISync, as a transport's author runs it under the transport's own launcher.

Each rank writes ``OUT/rank<r>.txt``: ``matches`` or the check's failure, and ends normally
either way (an error would abort the job, and mpiexec may drop an aborting rank's output).
``--no-broadcast`` leaves out MPISync's broadcast at setup, a fault the check must name.
"""

from __future__ import annotations

import sys
from pathlib import Path

from distconv.equivalence import JOB, assert_rank_matches_local
from distconv.sync.mpi import MPISync


class NoBroadcast(MPISync):
    """MPISync whose ranks each keep the weights they drew."""

    def broadcast_parameters(self) -> None:
        pass


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    kind = NoBroadcast if "--no-broadcast" in sys.argv else MPISync
    sync = kind(JOB.make_optimizer(), overlap=overlap, bucket_bytes=300)
    try:
        assert_rank_matches_local(sync)
        said = "matches"
    except AssertionError as failed:
        said = str(failed)
    finally:
        sync.close()
    (out / f"rank{sync.rank}.txt").write_text(said)


if __name__ == "__main__":
    main()
