"""A stand-in for cupy, for the MPI device-bucket tests only (tests/mpi/run_device_buckets.py):
there is no GPU on the CI machine, and MPISync's device path (buckets staged through host
buffers) would otherwise never run there. Nothing else may import it.

Its arrays are numpy arrays of a subclass whose module is ``cupy`` (so
:func:`distconv.backend.is_gpu_array` takes them for device arrays) and which, as cupy does,
refuse to meet plain numpy arrays in a ufunc or a numpy function (cupy raises TypeError where
code forgets to stage): only ``get`` and ``set`` cross between host and "device". Every
``get`` and ``set`` is logged with the thread that called it (:data:`moves`): the main thread
owns the device.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as _np

__version__ = "13.6.0"
#: (``"get"`` or ``"set"``, element count, whether on the main thread) of every host move
moves: list[tuple[str, int, bool]] = []


def _host_arrays(values: Any) -> list[Any]:
    """The plain numpy arrays (not 0-d) among ``values``, nested lists and tuples searched."""
    found = []
    for v in values:
        if isinstance(v, list | tuple):
            found += _host_arrays(v)
        elif type(v) is _np.ndarray and v.ndim:
            found.append(v)
    return found


def _refuse_host(values: Any) -> None:
    if _host_arrays(values):
        raise TypeError("Unsupported type <class 'numpy.ndarray'> (fake cupy: stage it first)")


def _log(what: str, size: int) -> None:
    moves.append((what, size, threading.current_thread() is threading.main_thread()))


class ndarray(_np.ndarray):  # noqa: N801 - cupy's spelling
    """A "device" array: numpy underneath, refusing host arrays as cupy does."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        out = kwargs.get("out", ())
        _refuse_host([*inputs, *out])
        plain = [i.view(_np.ndarray) if isinstance(i, ndarray) else i for i in inputs]
        if out:
            kwargs["out"] = tuple(o.view(_np.ndarray) for o in out)
        result = getattr(ufunc, method)(*plain, **kwargs)
        if out:
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        _refuse_host([*args, *kwargs.values()])
        return super().__array_function__(func, types, args, kwargs)

    def get(self, stream: Any = None, order: str = "C", out: Any = None) -> _np.ndarray:
        """A host copy (into ``out`` where given: a C-contiguous numpy array of this shape
        and dtype, as cupy requires)."""
        _log("get", self.size)
        if out is None:
            return _np.array(self.view(_np.ndarray), order=order)
        if type(out) is not _np.ndarray or out.shape != self.shape or out.dtype != self.dtype:
            raise ValueError("fake cupy: get(out=) needs a numpy array of the same shape and dtype")
        _np.copyto(out, self.view(_np.ndarray))
        return out

    def set(self, arr: Any, stream: Any = None) -> None:
        """Copy the host array ``arr`` (same shape and dtype) in."""
        _log("set", self.size)
        if type(arr) is not _np.ndarray or arr.shape != self.shape or arr.dtype != self.dtype:
            raise ValueError("fake cupy: set() needs a numpy array of the same shape and dtype")
        _np.copyto(self.view(_np.ndarray), arr)


def _wrap(result: Any) -> Any:
    if type(result) is _np.ndarray:
        return result.view(ndarray)
    return result


def asarray(a: Any, dtype: Any = None) -> ndarray:
    """A device copy of ``a`` (host or device)."""
    base = a.view(_np.ndarray) if isinstance(a, ndarray) else a
    return _np.array(base, dtype=dtype).view(ndarray)


def zeros(shape: Any, dtype: Any = float) -> ndarray:
    return _np.zeros(shape, dtype).view(ndarray)


def empty_like(a: Any, dtype: Any = None) -> ndarray:
    return _np.empty(a.shape, dtype or a.dtype).view(ndarray)


def zeros_like(a: Any, dtype: Any = None) -> ndarray:
    return _np.zeros(a.shape, dtype or a.dtype).view(ndarray)


def __getattr__(name: str) -> Any:
    """numpy's functions (sqrt, multiply, ...), their arrays made "device" arrays."""
    attr = getattr(_np, name)
    if not callable(attr) or isinstance(attr, type):
        return attr
    return lambda *args, **kwargs: _wrap(attr(*args, **kwargs))


cuda = SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=lambda: 1))
