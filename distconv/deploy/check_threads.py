"""A rank's thread pools fit the CPUs its limit gives it (part of
:func:`distconv.deploy.check.manifest_problems`).

The renderer sizes each rank's pools to its share of its container's CPU limit: the BLAS
libraries' (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``) and the step's
kernel threads (``DISTCONV_NUM_THREADS``). A limit lowered by hand, or an MPIJob's
``slotsPerWorker`` raised, leaves them behind: more threads than the CPU quota spend it early in
each period, the kernel throttles the container for the rest, and in data-parallel training
every other rank waits at each step for the throttled one. Under an MPIJob the variables are
the launcher's (mpirun hands its environment to each rank it starts) and the limit is the
worker pods', shared by their slots.

Fewer threads than CPUs are not named: the renderer itself gives fewer where a rank's share is
no whole number (``1.5`` CPUs: one thread), a rank runs more threads than its pools (its sync's
sockets, the probe server, checkpoint writes), to which an operator may leave a CPU on purpose,
and BLAS is held to one thread inside a step, so its variables below the limit idle nothing
there.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any

from distconv.deploy.check_ranks import _rank_containers, _ranks_per_pod, _trainers
from distconv.deploy.check_shards import env_as_seen
from distconv.deploy.counts import cpu_amount
from distconv.deploy.walk import Manifest, _here
from distconv.placement import INTEGER_TEXT

#: the variables that size a rank's thread pools, as the renderer sets them
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "DISTCONV_NUM_THREADS",
)


def thread_problems(objs: Sequence[Manifest]) -> Iterator[str]:
    """Each rank whose thread variables ask more threads than the CPUs its container's limit
    gives each of its ranks (at least one). Not judged where a value is no plain integer or only
    the cluster knows it, or where the container has no CPU limit (no quota to oversubscribe)."""
    for obj, where, template, container, _, _ in _trainers(objs):
        threads = _thread_counts(container)
        for holder, limited, ranks in _limited(obj, where, template, container) if threads else ():
            written = limited["resources"]["limits"]["cpu"]
            cpus = cpu_amount(written)
            allowed = max(1, math.floor(cpus / ranks))
            over = [f"{name}={n}" for name, n in threads.items() if n > allowed]
            if over:
                cpus_of = _cpus_of(cpus, written, ranks, holder, limited is container)
                yield (
                    f"{_here(where, container)}: {', '.join(over)} ask more threads than "
                    f"{cpus_of}: they would oversubscribe it, the kernel throttles the container "
                    "once they spend its CPU quota, and every other rank waits at each step for "
                    f"the throttled one; set them to {allowed}"
                )


def _limited(
    obj: Manifest, where: str, template: Manifest, container: Manifest
) -> Iterator[tuple[str, Manifest, int]]:
    """(how a line names it, container, ranks it runs) of each container with a CPU limit
    that the ranks of ``container`` run in: itself, or an MPIJob's worker containers."""
    for pod_where, pod in _rank_containers(obj, where, template, container):
        ranks = _ranks_per_pod(obj, pod_where)
        if ranks < 1:  # slotsPerWorker 0: named by count_problems, no share to compare with
            continue
        for limited in pod["spec"]["containers"]:
            if cpu_amount(limited.get("resources", {}).get("limits", {}).get("cpu")):
                yield _here(pod_where, limited), limited, ranks


def _thread_counts(container: Manifest) -> dict[str, int]:
    """The container's thread variables that it sets to a plain integer, as its ranks see them
    (``$(VAR)`` filled in); one only the cluster knows, or another text, is left out."""
    counts = {}
    for name in THREAD_VARIABLES:
        known, value = env_as_seen(container, name)
        if known and value is not None and INTEGER_TEXT.fullmatch(value):
            counts[name] = int(value)
    return counts


def _cpus_of(cpus: Fraction, written: Any, ranks: int, holder: str, own: bool) -> str:
    """The CPUs each rank gets, and whose limit gives them: the rank's own container's, or
    (under an MPIJob) the worker container's, shared by its slots, where mpirun starts the
    ranks with the launcher's variables."""
    limit = f"resources.limits.cpu {written}"
    if own:
        return f"the {_shown(cpus)} CPU(s) of its limit ({limit})"
    return (
        f"the {_shown(cpus / ranks)} CPU(s) each rank gets in {holder} ({limit} over "
        f"slotsPerWorker {ranks}), where mpirun starts the ranks with them"
    )


def _shown(amount: Fraction) -> str:
    """A CPU amount as an operator writes it: ``2``, ``1.5``, ``0.25``."""
    return f"{float(amount):.3f}".rstrip("0").rstrip(".")
