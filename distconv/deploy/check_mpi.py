"""The check of an MPIJob's slots (part of :func:`distconv.deploy.check.manifest_problems`):
``mpirun -np`` fits in the worker slots. A count field that is no integer is named by
:func:`~distconv.deploy.counts.count_problems` alone: nothing is compared with it here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from distconv.deploy.check_shards import _is_filled, expand
from distconv.deploy.counts import count, counted
from distconv.deploy.walk import (
    Manifest,
    _argv,
    _digits,
    _of_kind,
    _pod,
    _process_counts,
    _where,
)


def _mpi_slots(objs: Sequence[Manifest]) -> Iterator[str]:
    for mpijob in _of_kind(objs, "MPIJob"):
        spec = mpijob.get("spec", {})
        replicas = spec.get("mpiReplicaSpecs", {})
        worker, slots = replicas.get("Worker", {}), count(spec, "slotsPerWorker", 1)
        capacity = (count(worker, "replicas", 0) + bool(spec.get("runLauncherAsWorker"))) * slots
        # a count that is no integer is named by count_problems: no capacity to compare with
        known = counted(spec, "slotsPerWorker") and counted(worker, "replicas")
        for container in _mpiruns(_pod(replicas.get("Launcher", {})).get("containers", [])):
            counts = _process_counts(_argv(container))
            np = expand(counts[0], container) if counts else None  # as the kubelet passes it
            if len(counts) > 1:  # Hydra: "duplicate setting: np", the job never starts
                yield f"{_where(mpijob)} Launcher: mpirun refuses -np given {len(counts)} times"
            elif np is not None and _is_filled(np):  # only the cluster knows: not judged
                continue
            elif np is None or not _digits(np) or int(np) < 1:
                # -np 0 is not "no ranks": Hydra starts as many as it finds slots for
                yield f"{_where(mpijob)} Launcher: mpirun needs -np with a number, got {np!r}"
            elif known and int(np) > capacity:
                yield (
                    f"{_where(mpijob)} Launcher: -np {np} exceeds the workers' slots "
                    f"({capacity} = replicas x slotsPerWorker)"
                )


def _mpiruns(containers: list[Manifest]) -> list[Manifest]:
    """The launcher's containers that run mpirun (or mpiexec), not a sidecar beside it (a log
    shipper); all of them where none does, as one must."""
    runs = [c for c in containers if {a.rsplit("/", 1)[-1] for a in _argv(c)} & _MPIRUN]
    return runs or containers


#: the names Hydra's process manager goes by
_MPIRUN = {"mpirun", "mpiexec", "mpiexec.hydra"}
