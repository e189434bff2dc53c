"""What ``mpiexec``'s exit status cannot say: that a rank died of a signal, and which.

A rank killed by a signal makes MPICH's Hydra exit with the signal's number (9 for SIGKILL)
and OpenMPI's ``mpirun`` with its own code, the same statuses as a rank's ``exit(9)``: the
report said "mpiexec 0 failed with exit code 9" either way. Both name the signal in their last
lines, Hydra without the rank (``YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed
(signal 9)``), OpenMPI with it (``mpirun noticed that process rank 1 with PID 4242 on node a
exited on signal 9 (Killed).``); :func:`rank_signal` reads them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .child import signal_name

# matched from a line's first character: mpiexec's own lines are bare, while every line of a
# rank comes behind the rank MPI puts in front of it (``[1] ``, ``[1,1]<stdout>:``), so a rank
# that prints such a line (a log quoting an earlier run's banner) is not taken for mpiexec;
# OpenMPI's line begins with its program's name (mpirun, mpiexec, prterun, mpirun.openmpi);
# older Hydras (MPICH2's, an older Intel MPI's) print Hydra's without its "YOUR "
_HYDRA = re.compile(r"(?:YOUR )?APPLICATION TERMINATED WITH THE EXIT STRING: .*\(signal (\d+)\)")
_OPENMPI = re.compile(
    r"[\w.-]+ noticed that process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)"
)


def rank_signal(tail: Sequence[str]) -> str | None:
    """``rank 1 died of signal 9 (SIGKILL), as mpiexec says`` from the last lines of
    ``mpiexec``'s output (``a rank`` where MPI names none); None where they name no signal."""
    for line in reversed(tail):
        found = _OPENMPI.match(line)
        if found is not None:
            return _said(f"rank {found[1]}", int(found[2]))
        found = _HYDRA.match(line)
        if found is not None:
            return _said("a rank", int(found[1]))
    return None


def _said(who: str, number: int) -> str:
    return f"{who} died of signal {number} ({signal_name(number)}), as mpiexec says"
