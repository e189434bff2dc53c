"""Which rank of the job a failure is, for ``failure.json``'s ``failed_rank``: a worker's own
rank; under ``mpi`` the child that failed is mpiexec (rank 0 of its role), and the rank is the
one its cause names, where mpiexec's last lines say which (:mod:`launcher.mpi_exit`); None
where it is not known (a shard, which is no rank; "a rank" died, which one not said).

An alert keyed on ``failure.json``'s ``role`` and ``rank`` blamed rank 0 (mpiexec's index)
for every MPI job; ``failed_rank`` is the rank the operator looks for.
"""

from __future__ import annotations

import re

#: how :mod:`launcher.mpi_exit` names a rank in mpiexec's cause: ``rank 1 died of signal 9
#: (SIGKILL), as mpiexec says`` (:func:`~launcher.mpi_exit.signal_cause`), ``rank 1 ended the
#: job: ...`` and ``rank 1 ended itself (SIGKILL) after: ...``
#: (:func:`~launcher.mpi_exit.said_by_rank`); the first such words in the cause are its lead
_NAMED = re.compile(r"\brank (\d+) (?:died of signal \d+ \(|ended the job: |ended itself \()")


def failed_rank(role: str, rank: int, cause: str | None) -> int | None:
    """The rank of the job that failed, where the child that failed is ``role`` ``rank`` and
    its cause reads ``cause``: a worker's own rank, the rank mpiexec's cause names; else None."""
    if role == "worker":
        return rank
    if role != "mpiexec":
        return None
    found = _NAMED.search(cause or "")
    return None if found is None else int(found[1])
