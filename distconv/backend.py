"""The array module (numpy or cupy) and moves between host and device.

cupy is imported here and nowhere else, only when the GPU is asked for, so ``import distconv``
needs numpy alone. Layer code asks :func:`get_array_module` for the module of its inputs and
never calls ``numpy`` on data directly, so one code path serves both devices.
"""

from __future__ import annotations

import math
import os
from types import ModuleType
from typing import Any, Literal, cast

import numpy

#: where arrays live: the host (numpy) or a CUDA device (cupy)
Device = Literal["cpu", "gpu"]
#: the device names, as :func:`device_name` takes them in any case
DEVICES: tuple[Device, ...] = ("cpu", "gpu")
#: the types a network trains in (bfloat16 is ``ml_dtypes``'), named where a dtype is refused:
#: ml_dtypes' float8 and smaller types pass the layers, but the im2col views or safetensors
#: refuse some of them
TRAINING_DTYPES = ("float16", "float32", "float64", "bfloat16")
#: arrays of at least this many elements are checked through a dot product (see all_finite)
DOT_CHECK_SIZE = 16384
#: the dot product the check takes (a name of its own, so a test can watch it)
_dot = numpy.dot
#: the dtypes whose check may take the dot product: float32, which BLAS reads without a copy or
#: rounding on one thread; not float64, whose ddot OpenBLAS spreads over every core it may, so
#: where processes share the cores (two ranks, a rank and a shard) one check of 512 K took
#: 0.4-8 ms against 0.1-0.2 ms for isfinite
_DOT_DTYPES = (numpy.dtype(numpy.float32),)
_device = "cpu"
_cupy: ModuleType | None = None


class BackendError(RuntimeError):
    """The requested device cannot be used (cupy missing, no CUDA device)."""


def _import_cupy() -> ModuleType:
    global _cupy
    if _cupy is None:
        try:
            import cupy
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise BackendError(
                "device 'gpu' needs cupy, which is not importable here "
                f"({exc}); install the GPU extra: pip install 'distconv[gpu]'"
            ) from exc
        try:
            cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # pragma: no cover - depends on the machine
            raise BackendError(
                f"device 'gpu': cupy is installed but no CUDA device works: {exc}"
            ) from exc
        _cupy = cupy
    return _cupy


def device_name(name: Any, what: str = "device") -> Device:
    """``name`` as one of :data:`DEVICES`, its case and surrounding blanks ignored: one rule for
    ``set_device``, ``to_device`` and ``DISTCONV_DEVICE`` (``"GPU"`` was taken from the
    variable but refused by ``set_device``, and ``to_device(a, "cuda")`` kept ``a`` on the
    host without a word).

    Raises:
        BackendError: naming ``what`` (the argument or variable) and the value given.
    """
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in DEVICES:
        raise BackendError(f"{what} must be one of {DEVICES} (any case), got {name!r}")
    return cast(Device, key)


def set_device(name: Device, local_rank: int = 0) -> None:
    """Choose where new arrays live: ``"cpu"`` (numpy) or ``"gpu"`` (cupy).

    Args:
        name: ``"cpu"`` or ``"gpu"``, in any case.
        local_rank: this process's index among the job's processes on its host (the
            runtime's ``local_rank``); on ``"gpu"`` it takes CUDA device ``local_rank``.

    Raises:
        BackendError: for ``"gpu"`` when cupy or a CUDA device is missing, or when this host
            has no device ``local_rank``; for an unknown device name.
    """
    global _device
    name = device_name(name)
    if name == "gpu":
        cupy = _import_cupy()
        cupy.cuda.Device(gpu_index(local_rank, cupy.cuda.runtime.getDeviceCount())).use()
    _device = name


def gpu_index(local_rank: int, device_count: int, visible: str | None = None) -> int:
    """The CUDA device a process uses: device ``local_rank`` of the ``device_count`` it sees.

    One process per GPU, as DDP and Horovod place them: the ranks on a host take devices 0, 1,
    ... in local-rank order, so two ranks never share a device by accident. A scheduler that
    gives each task its own GPU (SLURM's ``--gpus-per-task=1``, a Kubernetes GPU limit of 1)
    names exactly one device in ``CUDA_VISIBLE_DEVICES``: that one, device 0, is this
    process's whatever its local rank.

    Args:
        local_rank: the process's rank on its host.
        device_count: the CUDA devices this process sees.
        visible: ``CUDA_VISIBLE_DEVICES`` (read from the environment when None).

    Raises:
        BackendError: ``local_rank`` is negative, or there are not that many devices.
    """
    if local_rank < 0:
        raise BackendError(f"local rank must be >= 0, got {local_rank}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible is None else visible
    if device_count == 1 and len([d for d in visible.split(",") if d.strip()]) == 1:
        return 0  # the scheduler chose this process's device
    if local_rank >= device_count:
        raise BackendError(
            f"local rank {local_rank} needs CUDA device {local_rank}, but this process sees "
            f"{device_count} device(s): start at most {device_count} GPU rank(s) per host, "
            "or leave CUDA_VISIBLE_DEVICES unset so every rank sees every device"
        )
    return local_rank


def device_from_env(default: Device = "cpu") -> Device:
    """The device named by ``DISTCONV_DEVICE``, or ``default``.

    Raises:
        BackendError: the variable names no device (the error names the variable: a value
            set long ago in a shell's profile is no flag its user sees).
    """
    return device_name(os.environ.get("DISTCONV_DEVICE", "").strip() or default, "DISTCONV_DEVICE")


def _is_cupy(a: Any) -> bool:
    # by the type's module, so a cupy array is recognised even before set_device("gpu")
    return type(a).__module__.partition(".")[0] == "cupy"


def get_array_module(*arrays: Any) -> ModuleType:
    """numpy or cupy, whichever the given arrays belong to (numpy when none is a cupy array)."""
    for a in arrays:
        if _is_cupy(a):
            return _import_cupy()
    return numpy


def is_gpu_array(a: Any) -> bool:
    """Whether ``a`` is a cupy array."""
    return _is_cupy(a)


def to_device(a: Any, device: Device | None = None) -> Any:
    """Copy ``a`` to ``device`` (the current one by default); no copy when it is already there.

    Raises:
        BackendError: ``device`` names no device (:func:`device_name`).
    """
    if (_device if device is None else device_name(device)) == "gpu":
        return _import_cupy().asarray(a)
    return to_host(a)


def to_host(a: Any) -> numpy.ndarray:
    """A numpy array with the contents of ``a`` (a copy only when ``a`` lives on the GPU)."""
    if is_gpu_array(a):
        return a.get()
    return numpy.asarray(a)


def copy_into(target: Any, source: Any) -> None:
    """``target[...] = source`` on ``target``'s device and in its dtype (host or device source)."""
    device = "gpu" if is_gpu_array(target) else "cpu"
    target[...] = to_device(to_host(source).astype(target.dtype, copy=False), device)


def resolve_dtype(dtype: Any, what: str = "dtype") -> numpy.dtype:
    """``numpy.dtype(dtype)``, where the name ``"bfloat16"`` is ``ml_dtypes``' type: numpy
    knows that name only once ``ml_dtypes`` has been imported.

    Args:
        dtype: a name (``"float32"``), a numpy type or dtype, or None (float64, as numpy).
        what: the argument it was given as, for the error (``"Trainer dtype"``).

    Raises:
        ValueError: ``"bfloat16"`` without ``ml_dtypes`` installed.
        TypeError: a type numpy does not know, naming ``what`` and the types one trains in
            (numpy's own words, "data type 'float33' not understood", named neither).
    """
    if isinstance(dtype, str) and dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ValueError("dtype 'bfloat16' needs ml_dtypes: pip install ml_dtypes") from None
        return numpy.dtype(ml_dtypes.bfloat16)
    try:
        return numpy.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"{what}={dtype!r} is no data type numpy knows; give one of "
            f"{', '.join(TRAINING_DTYPES)} (a name or numpy's type)"
        ) from None


#: the arrays :func:`is_array` takes, and how to hand a torch tensor: for error messages
ARRAY_KINDS = "numpy or cupy; a torch tensor as t.numpy()"


def is_array(a: Any) -> bool:
    """Whether ``a`` is an array distconv computes on: numpy's or cupy's (a numpy scalar too),
    whose ``dtype`` is a numpy dtype. A torch tensor has a shape and a dtype too, but torch's
    dtype: taken, it failed far from where it came in ("Cannot interpret 'torch.float32' as a
    data type", "'torch.dtype' object has no attribute 'kind'")."""
    return isinstance(getattr(a, "dtype", None), numpy.dtype) and hasattr(a, "shape")


def is_float_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` is a real floating-point type: numpy's (float16/32/64 ...) or one of
    ``ml_dtypes``' floats (bfloat16, float8 ...), whose numpy kind is ``"V"`` as is that of
    its int2/int4 types."""
    dt = resolve_dtype(dtype)
    if dt.kind == "f":
        return True
    return dt.kind == "V" and dt.type.__module__ == "ml_dtypes" and "float" in dt.name


def sum_dtype(dtype: Any) -> str | None:
    """The type to add many values of ``dtype`` in: ``"float32"`` for a 16-bit float (numpy
    adds float16 and ``ml_dtypes``' bfloat16 in their own type, so a long sum drifts, overflows
    or stops growing), else None: their own."""
    dt = resolve_dtype(dtype)
    return "float32" if dt.itemsize < 4 and is_float_dtype(dt) else None


def widened(a: Any) -> Any:
    """``a`` in the type its sums are taken in: a 16-bit float array (or scalar) as float32
    (:func:`sum_dtype`), anything else (a Python number too) itself, not copied."""
    dtype = getattr(a, "dtype", None)
    wide = sum_dtype(dtype) if dtype is not None else None
    return a if wide is None else a.astype(wide)


def all_finite(a: Any, dot_from: int = DOT_CHECK_SIZE) -> bool:
    """No NaN or Inf in ``a`` (a numpy or cupy array).

    Integers and booleans always pass; float, complex and ``ml_dtypes`` arrays (bfloat16 ...)
    are checked with ``isfinite(a).all()``, without a copy. A contiguous float32 CPU array
    of at least ``dot_from`` elements first takes the dot product of ``a`` with
    itself: it is NaN or Inf whenever ``a`` holds one (a square is never negative, so
    infinities cannot cancel), so a finite dot proves the answer in one read pass with no
    temporary, about 0.7 times the CPU of ``isfinite`` with BLAS on one thread. Huge finite
    values can overflow the dot; then the exact test decides. Where BLAS may wake its threads
    for the dot, a larger ``dot_from`` pays.

    Raises:
        TypeError: ``a``'s dtype is none of those (object, structured, datetime ...).
    """
    dtype = a.dtype
    if dtype.kind in "biu":
        return True
    cpu = not is_gpu_array(a)
    if cpu and dtype in _DOT_DTYPES and a.size >= dot_from and a.flags.c_contiguous:
        flat = a.reshape(-1)  # a view: the array is contiguous
        with numpy.errstate(all="ignore"):  # squares past the range, or under it: isfinite decides
            if math.isfinite(_dot(flat, flat)):
                return True
    elif dtype.kind not in "fc" and dtype.type.__module__ != "ml_dtypes":
        raise TypeError(f"cannot check a {dtype} array for NaN/Inf: not a number dtype")
    return bool(get_array_module(a).isfinite(a).all())
