"""The node's shared-memory files of an MPI job that aborts.

MPICH keeps the segment its ranks on one node share as a file in ``/dev/shm``
(``mpich_shm_<hex>_0``, 2 MiB with two ranks) and unlinks it only in ``MPI_Finalize``. A job
that ends by ``MPI_Abort`` never gets there, so each aborted job left its file behind, in memory
until the host reboots (this project's tests, which abort jobs on purpose, filled 23 GiB of
``/dev/shm`` over some days of runs). A rank about to abort unlinks the segments it maps
first: the ranks still running keep their mappings (an unlinked file lives while it is mapped),
and the file goes with the last of them. Read from ``/proc/self/maps`` (Linux); elsewhere
nothing is found. Only MPICH's files are looked for (the MPI the ``mpi`` extra installs).
"""

from __future__ import annotations

import contextlib
import os
import re

#: a mapping of an MPICH segment in ``/proc/self/maps``: its path ends the line (one unlinked
#: already ends in `` (deleted)`` and does not match)
_MPICH_SEGMENT = re.compile(r" (/dev/shm/mpich_shm_[^ /]+)$", re.MULTILINE)


def mapped_segments(maps: str = "/proc/self/maps") -> list[str]:
    """The paths of the MPICH shared-memory files this process maps, sorted, each once."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as table:
            return sorted(set(_MPICH_SEGMENT.findall(table.read())))
    except OSError:  # no /proc: nothing to name
        return []


def unlink_segments() -> None:
    """Unlink :func:`mapped_segments`, before ``MPI_Abort``; one another rank unlinked first,
    or that cannot be unlinked, is left as it is (an abort must go on whatever happens here)."""
    for path in mapped_segments():
        with contextlib.suppress(OSError):
            os.unlink(path)
