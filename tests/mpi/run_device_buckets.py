"""mpiexec -n 2 python -m mpi4py run_device_buckets.py OUT DEVICE: MPISync's device path.

DEVICE ``fake`` puts the stand-in cupy of ``tests/mpi/fake_cupy`` first on the path (no GPU
on the CI machine: it stands in for cupy here and nowhere else), and so does ``mixed``: rank
0's parameters on that device, rank 1's on the host, each rank writing what its setup said
(:func:`mixed`); ``gpu`` uses cupy itself,
rank r on device ``r % count``. For each configuration (thread or none, native or float16
wire, SGD or Adam) the same parameters and per-rank gradients train three steps twice: on the
device, then on the host. Each rank writes ``OUT/rank<r>.json``: per configuration, whether the
values after the device run and after the host run, and (fake) the host moves of the device
buckets; rank 1 starts from other values, which setup's broadcast must replace.
Every buffer handed to MPI is checked to be a host array (:class:`HostOnlyComm`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

if sys.argv[2] in ("fake", "mixed"):
    sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_cupy"))

import cupy  # noqa: E402
from mpi4py import MPI  # noqa: E402

from distconv.backend import is_gpu_array, to_host  # noqa: E402
from distconv.optim import create_optimizer  # noqa: E402
from distconv.parameter import Parameter  # noqa: E402
from distconv.sync.base import SyncError  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402

STEPS = 3
#: (overlap, grad_dtype, optimizer)
CONFIGS = [
    (False, None, "sgd"),
    (True, None, "adam"),
    (False, "float16", "adam"),
    (True, "float16", "sgd"),
]


def _device_arrays(values: Any) -> bool:
    for v in values:
        if isinstance(v, list | tuple) and _device_arrays(v):
            return True
        if is_gpu_array(v):
            return True
    return False


class HostOnlyComm:
    """The communicator, refusing any device array handed to MPI (the sync stages every
    device bucket through host memory, so any MPI, CUDA-aware or not, works)."""

    def __init__(self, comm: Any) -> None:
        self._comm = comm

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._comm, name)
        if not callable(method):
            return method

        def checked(*args: Any, **kwargs: Any) -> Any:
            if _device_arrays([*args, *kwargs.values()]):
                raise AssertionError(f"a device array was handed to MPI's {name}")
            return method(*args, **kwargs)

        return checked

    def Dup(self) -> HostOnlyComm:  # noqa: N802 - mpi4py's spelling
        return HostOnlyComm(self._comm.Dup())


def gradients(rank: int, step: int, name: str, size: int) -> np.ndarray:
    """This rank's gradient sum for ``name`` at ``step``: exact in float16, another per rank."""
    base = np.arange(1, size + 1) * (rank + 1) * 0.25 + step
    return base if name != "b" else -base


def train(config: tuple, to: Any, rank: int) -> dict[str, list[float]]:
    """Three steps on arrays made by ``to`` (device or host); the values after them."""
    overlap, grad_dtype, optimizer = config
    start = {"a": np.linspace(-1, 1, 7), "b": np.linspace(2, 3, 5).astype(np.float32)}
    params = [Parameter(n, to(v + rank)) for n, v in start.items()]  # rank 1's are wrong
    params.append(Parameter("c", to(np.full(6, 0.5))))  # a second float64 bucket (8 bytes)
    sync = MPISync(
        create_optimizer(optimizer, lr=0.01), comm=HostOnlyComm(MPI.COMM_WORLD),
        bucket_bytes=64, grad_dtype=grad_dtype, overlap=overlap, timeout=60,
    )  # fmt: skip
    try:
        sync.setup(params, {})
        for step in range(STEPS):
            sync.start_step(8)
            for p in reversed(params):
                p.grad[...] = to(gradients(rank, step, p.name, p.size).astype(p.value.dtype))
                sync.on_gradient(p)
            sync.finish_step()
    finally:
        sync.close()
    return {p.name: to_host(p.value).tolist() for p in params}


def mixed(out: Path, rank: int) -> None:
    """Rank 0's parameters on the device, rank 1's on the host: each rank writes what its
    setup said (or the values it trained to)."""
    try:
        said = {"trained": train(CONFIGS[-1], cupy.asarray if rank == 0 else np.asarray, rank)}
    except SyncError as exc:
        said = {"error": f"{type(exc).__name__}: {exc}"}
    (out / f"rank{rank}.json").write_text(json.dumps(said))


def main() -> None:
    out, rank = Path(sys.argv[1]), MPI.COMM_WORLD.Get_rank()
    if sys.argv[2] == "mixed":
        mixed(out, rank)
        return
    if sys.argv[2] == "gpu":
        cupy.cuda.Device(rank % cupy.cuda.runtime.getDeviceCount()).use()
    results = []
    for config in CONFIGS:
        moves = getattr(cupy, "moves", [])
        del moves[:]  # the fake's log: this configuration's device run only
        device = train(config, cupy.asarray, rank)
        staged = [m for m in moves if m[1] > 1]  # the buckets', not setup's 0-d Adam step
        host = train(config, np.asarray, rank)
        results.append({"config": config, "device": device, "host": host, "moves": staged})
    (out / f"rank{rank}.json").write_text(json.dumps(results))


if __name__ == "__main__":
    main()
