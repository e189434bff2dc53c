"""The node's shared-memory files of an MPICH job, unlinked as soon as MPI is up.

MPICH keeps the segment its ranks on one node share as a file in ``/dev/shm``
(``mpich_shm_<hex>_<node>``, 2 MiB with two ranks; with ``MPIR_CVAR_CH4_NUM_VCIS`` above 1,
a second, ``mpich_vci_<hex>_<node>``) and unlinks them only in ``MPI_Finalize``. A
job that ends any other way (``MPI_Abort``, a SIGKILL from the OOM killer, a cgroup or Hydra at
a second Ctrl-C) left its file behind, in memory until the host reboots: one per job or
restart attempt (this project's tests, which abort jobs on purpose, filled 23 GiB of
``/dev/shm`` over some days of runs). So each rank unlinks it the moment it finds MPI
initialised (:func:`unlink_segments`, from :func:`~distconv.sync.mpi.comm.import_mpi`): the
ranks keep their mappings (an unlinked file lives while it is mapped), the file goes with the
last of them however they end, and nothing is left to clean up on the way out.

Safe because no rank opens either file after ``MPI_Init`` returns anywhere: each local rank
opens them by name, once (``MPL_initshm_open``, without a lock: a rank finding no file would
make a second one of its own), while ``MPI_COMM_WORLD`` is set up in ``MPI_Init``, and that
set-up returns only once every local rank has set its flag in the first (even a rank slow to
start) and met the others in a barrier after opening the second. Later communicators
(``Split_type``, ``Dup``) reuse the mappings; a spawned job has files of its own. Read from
``/proc/self/maps`` (Linux); elsewhere nothing is found. Only MPICH's files are looked for (the
MPI the ``mpi`` extra installs); MPICH unlinks its other segments (its shared windows', its
bootstrap's) itself once every rank has attached, and so does UCX.
"""

from __future__ import annotations

import contextlib
import os
import re

#: a mapping of an MPICH segment in ``/proc/self/maps``: its path ends the line (one unlinked
#: already ends in `` (deleted)`` and does not match); not past it: the last line's name took
#: the file's closing newline, and its unlink failed
_MPICH_SEGMENT = re.compile(r" (/dev/shm/mpich_(?:shm|vci)_[^ /\n]+)$", re.MULTILINE)


def mapped_segments(maps: str = "/proc/self/maps") -> list[str]:
    """The paths of the MPICH shared-memory files this process maps, sorted, each once."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as table:
            return sorted(set(_MPICH_SEGMENT.findall(table.read())))
    except OSError:  # no /proc: nothing to name
        return []


def unlink_segments() -> None:
    """Unlink :func:`mapped_segments`: call it once MPI is initialised (before that, and after
    ``MPI_Finalize``, none is mapped). One another rank unlinked first, or that cannot be
    unlinked, is left as it is; one unlinked already is not named again, so a second call
    does nothing."""
    for path in mapped_segments():
        with contextlib.suppress(OSError):
            os.unlink(path)
