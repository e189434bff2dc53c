"""The cores a process may use, and how many of the job's processes share its host.

Threads are sized from both: a rank's kernel threads (:func:`distconv.kernels.parallel.
num_threads`) and whether the MPI sync's communication thread has a core to itself
(:mod:`distconv.sync.mpi.comm`). Two ranks that each took every core of their host would run
twice as many threads as there are cores, and a container limited to 2 CPUs still sees all of
its node's cores in its affinity mask.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Mapping
from pathlib import Path

from distconv.placement import INTEGER_TEXT

log = logging.getLogger("distconv.cores")

#: how many of the job's processes a launcher started on this host: MPICH's Hydra's, Open MPI's
#: (set for each process by the mpiexec that started it), then torchrun's name, which a shell
#: may still hold from another job
LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE")


def processes_on_this_host(environ: Mapping[str, str] | None = None) -> int:
    """How many of the job's processes share this host, as the launcher that started this one
    says (:data:`LOCAL_SIZE_VARS`, the first that is a positive integer, ``+2`` as ``2``); 1
    where none says.

    So that ranks started side by side by ``mpiexec -n 2`` split the cores between them instead
    of each taking all of them for its kernel threads.
    """
    env = os.environ if environ is None else environ
    for name in LOCAL_SIZE_VARS:
        count = _positive(env.get(name, ""))
        if count is not None:
            return count
    return 1


def _integer(text: str) -> int | None:
    """``text`` as an integer of ASCII digits with an optional sign, or None.

    ASCII digits: str.isdigit() takes "²", which int() refuses, and every kernel failed; the
    rule is the one rank variables are read by (:data:`distconv.placement.INTEGER_TEXT`).
    """
    return int(text) if INTEGER_TEXT.fullmatch(text) else None


def _positive(text: str) -> int | None:
    """``text`` as a positive integer (see :func:`_integer`), or None."""
    number = _integer(text)
    return number if number is not None and number > 0 else None


def usable_cores(cgroup_root: str | os.PathLike = "/sys/fs/cgroup") -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup CPU quota.

    Outside Linux (no affinity mask) ``os.cpu_count()`` stands for the mask. A container
    limited to 2 CPUs on a 64-core node sees 64 in its affinity mask; the quota
    (``cpu.max`` in cgroup v2, ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` in v1, directly
    under ``cgroup_root`` or in its ``cpu`` or ``cpu,cpuacct`` folder) says 2.

    Args:
        cgroup_root: where the cgroup file system is mounted (tests pass a folder of their own).
    """
    # no affinity mask outside Linux: every core the machine has
    has_mask = hasattr(os, "sched_getaffinity")
    affinity = len(os.sched_getaffinity(0)) if has_mask else (os.cpu_count() or 1)
    # read once: every kernel call asks. Keyed by the folder's name, not a Path: building and
    # hashing a Path on every call cost more than the affinity read and the env reads together
    quota = _cgroup_quota(os.fspath(cgroup_root))
    return affinity if quota is None else max(1, min(affinity, math.ceil(quota)))


@functools.lru_cache(maxsize=4)
def _cgroup_quota(cgroup_root: str) -> float | None:
    """CPUs the cgroup quota allows (quota / period), or None without a quota.

    As the kernel writes them: v2's ``cpu.max`` holds "max" or a positive quota, then a
    positive period; v1's ``cpu.cfs_quota_us`` a positive quota or -1 (no limit), its
    ``cpu.cfs_period_us`` a positive period. Any other text is malformed: a warning names the
    file, and the next place is read (none: no quota), never a count made of it.
    """
    root = Path(cgroup_root)
    text = _read(root / "cpu.max")
    if text is not None:
        words = text.split()
        period = _positive(words[1]) if len(words) >= 2 else None
        if period is not None and words[0] == "max":
            return None
        quota = _positive(words[0]) if period is not None else None
        if quota is not None:
            return quota / period
        _malformed(f"{root / 'cpu.max'} reads {text!r}")
    for folder in (root, root / "cpu", root / "cpu,cpuacct"):
        quota_text = _read(folder / "cpu.cfs_quota_us")
        period_text = _read(folder / "cpu.cfs_period_us")
        if quota_text is None or period_text is None:
            continue
        quota, period = _integer(quota_text), _positive(period_text)
        if quota is not None and quota != 0 and period is not None:
            return None if quota < 0 else quota / period
        _malformed(
            f"{folder / 'cpu.cfs_quota_us'} reads {quota_text!r}, "
            f"{folder / 'cpu.cfs_period_us'} reads {period_text!r}"
        )
    return None


def _read(path: Path) -> str | None:
    """The file's text (bytes no UTF-8 decodes stand as U+FFFD: malformed), None without it."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _malformed(what: str) -> None:
    log.warning("%s: no CPU quota the kernel writes, so none is counted from it", what)
