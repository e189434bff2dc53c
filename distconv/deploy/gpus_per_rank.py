"""How many GPUs a rendered training rank may request (``distconv-launch k8s --gpus``): 0 or 1,
as local rank R of a pod trains on CUDA device R and on no other. The words of the refusal of
more, and the way to use more GPUs per pod, for the launcher's option parsing (a usage error)
and for the renderer's own check of its callers' arguments alike."""

from __future__ import annotations

#: the most GPUs a training rank uses
MAX_GPUS_PER_RANK = 1


def too_many_gpus(gpus: int) -> str | None:
    """Why ``gpus`` GPUs per training rank cannot render, and how to use that many per pod
    instead, after ``--gpus `` (``must be 0 or 1 ..., got 2: ...``); None where ``gpus`` is
    at most :data:`MAX_GPUS_PER_RANK`. (A count below 0 is refused as any count is.)"""
    if gpus <= MAX_GPUS_PER_RANK:
        return None
    return (
        f"must be 0 or 1 (GPUs per training rank), got {gpus}: a rank trains on one device, so "
        f"{gpus - 1} of each rank's {gpus} would sit idle. To use {gpus} GPUs per pod, give "
        f"--gpus 1 --slots-per-worker {gpus} in an MPIJob (a rank per GPU, "
        f"--workers a multiple of {gpus}); in a "
        "parameter-server job, give more --workers (a pod of one rank and one GPU each)"
    )
