"""How a rank of an MPI job that failed before it initialised MPI ends the job: the other ranks
wait for it in ``MPI_Init`` or in their first collective.

Where every rank failed so (a bad option, which each rank's ``argparse`` refuses alike), they
finalise MPI and exit with their status: nobody waits for anyone, and MPICH's Hydra removes its
``/tmp/hydra_hwloc_xmlfile_*``, which an ``MPI_Abort`` leaves behind. Where another rank did not
fail, a rank cannot finalise (MPICH's ``MPI_Finalize`` waits for every rank, and that one waits
in a collective for this one): it aborts the job.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

import numpy as np

from distconv.sync.mpi.comm import import_mpi
from distconv.sync.mpi.shared_memory import unlink_segments

#: the tag of the word a rank that failed before ``MPI_Init`` sends each other rank; a
#: collective never matches a point-to-point message, so a rank that did not fail never sees it
FAILED_BEFORE_INIT_TAG = 27_182
#: how long such a rank waits for that word from every other rank before it takes one of them
#: for healthy and aborts: ``MPI_Init`` returns on every rank together, and those that failed
#: send at once
AGREE_SECONDS = 5.0


def abort_uninitialised(status: int, give_up_after: int = 60) -> None:
    """End the MPI job with ``status`` from a rank that failed before it initialised MPI.

    The other ranks wait for this one in ``MPI_Init`` (which waits for every rank) or in their
    first collective, and MPICH's Hydra ends a job for a rank that exits non-zero only once that
    rank has initialised MPI: a plain exit leaves them waiting for ever. So this initialises
    MPI. Where every rank failed before ``MPI_Init`` (:func:`every_rank_failed`), it finalises
    MPI and returns: the caller exits with ``status``, as every other rank does. Else it aborts
    the job. Where no other rank ever initialises (they exited without this, or run another
    transport), ``MPI_Init`` never returns: SIGALRM ends the process after ``give_up_after``
    seconds, as it does should the agreement or ``MPI_Finalize`` hang. Where MPI is
    initialised already, the sync's close or mpi4py's exit aborts, past
    :func:`~distconv.sync.mpi.leaving.abort`'s clean-up; this only unlinks the node's
    shared-memory files first (:func:`unlink_segments`), which no sync has unlinked yet where
    it fails before one is built.
    """
    if "mpi4py.MPI" in sys.modules:
        # mpi4py's Abort skips MPI_Finalize, which alone unlinks them: each refused job left
        # 2 MiB in /dev/shm (safe once MPI_Init returned: shared_memory says why)
        unlink_segments()
        return
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # from the kernel: MPI_Init may hold the GIL
    signal.alarm(give_up_after)
    mpi = import_mpi()  # MPI_Init, then the node's files unlinked, as for every rank
    if mpi is None:  # no MPI here, so none the others could wait in
        signal.alarm(0)
        return
    if every_rank_failed(mpi.COMM_WORLD, mpi, AGREE_SECONDS):
        mpi.Finalize()  # waits for every rank, each of which is finalising too
        signal.alarm(0)
        return
    from distconv.sync.mpi.leaving import abort  # it imports this module

    abort(mpi.COMM_WORLD, status)


def every_rank_failed(world: Any, mpi: Any, seconds: float) -> bool:
    """Whether every other rank of ``world`` failed before ``MPI_Init`` too, for a rank that
    did: it sends each other rank its word (:data:`FAILED_BEFORE_INIT_TAG`) and waits up to
    ``seconds`` for every other rank's. Once it has them all, its own have been received (each
    of those ranks is in here, and receives them), so none is left in flight at
    ``MPI_Finalize``; where one is missing, the job is aborted, in-flight words and all."""
    rank = world.Get_rank()
    others = [r for r in range(world.Get_size()) if r != rank]
    word = np.zeros(1, dtype=np.int32)
    heard = np.zeros(len(others), dtype=np.int32)
    sends = [world.Isend(word, dest=r, tag=FAILED_BEFORE_INIT_TAG) for r in others]
    receives = [
        world.Irecv(heard[i : i + 1], source=r, tag=FAILED_BEFORE_INIT_TAG)
        for i, r in enumerate(others)
    ]
    deadline = time.monotonic() + seconds
    while not mpi.Request.Testall(receives):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    mpi.Request.Waitall(sends)
    return True
