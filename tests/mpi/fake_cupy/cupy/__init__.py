"""A stand-in for cupy, for the MPI device-bucket tests only (tests/mpi/run_device_buckets.py):
there is no GPU on the CI machine, and MPISync's device path (buckets staged through host
buffers) would otherwise never run there. Nothing else may import it.

Its arrays hold a numpy array they never hand out, in a class whose module is ``cupy`` (so
:func:`distconv.backend.is_gpu_array` takes them for device arrays). Like cupy's, they refuse
to become numpy arrays implicitly (``np.asarray``, ``host[...] = device``, the buffer protocol
that MPI would read: TypeError) and to meet plain numpy arrays in a ufunc or a numpy function
(cupy raises TypeError where code forgets to stage): only ``get`` and ``set`` cross between
host and "device". Every ``get`` and ``set`` is logged with the thread that called it
(:data:`moves`): the main thread owns the device. It computes with numpy, so its errors are
numpy's words, not cupy's: code that reads an error's text is tested with cupy's own words,
quoted from its source (tests/layers/test_researcher_feed_blame.py).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as _np
from numpy.lib.mixins import NDArrayOperatorsMixin

__version__ = "13.6.0"
#: (``"get"`` or ``"set"``, element count, whether on the main thread) of every host move
moves: list[tuple[str, int, bool]] = []


def _log(what: str, size: int) -> None:
    moves.append((what, size, threading.current_thread() is threading.main_thread()))


def _device(value: Any) -> Any:
    """``value`` as the numpy array a device array holds, lists and tuples searched; a plain
    numpy array (not 0-d, which cupy takes as a scalar) is refused, as cupy refuses it."""
    if isinstance(value, ndarray):
        return value._data
    if isinstance(value, list | tuple):
        return type(value)(_device(v) for v in value)
    if type(value) is _np.ndarray and value.ndim:
        raise TypeError("Unsupported type <class 'numpy.ndarray'> (fake cupy: stage it first)")
    return value


def _wrap(result: Any) -> Any:
    """numpy's result as device arrays: 0-d ones for numpy's scalars too (an element, a
    reduction), which cupy keeps on the device."""
    if type(result) is _np.ndarray:
        return ndarray(result)
    if isinstance(result, _np.generic):
        return ndarray(_np.asarray(result))
    if isinstance(result, tuple):
        return tuple(_wrap(r) for r in result)
    return result


class ndarray(NDArrayOperatorsMixin):  # noqa: N801 - cupy's spelling
    """A "device" array: a numpy array inside, never handed to numpy or to MPI implicitly."""

    __slots__ = ("_data",)

    def __init__(self, data: _np.ndarray) -> None:
        self._data = data

    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    size = property(lambda self: self._data.size)
    ndim = property(lambda self: self._data.ndim)
    nbytes = property(lambda self: self._data.nbytes)
    itemsize = property(lambda self: self._data.itemsize)
    strides = property(lambda self: self._data.strides)
    flags = property(lambda self: self._data.flags)
    T = property(lambda self: ndarray(self._data.T))

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
            "construct a NumPy array explicitly."
        )

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        given = kwargs.get("out")
        if given is not None:
            kwargs["out"] = _device(given)
        result = getattr(ufunc, method)(*_device(inputs), **kwargs)
        if given is not None:  # cupy returns the arrays given
            return given[0] if len(given) == 1 else given
        return _wrap(result)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        plain = {k: _device(v) for k, v in kwargs.items()}
        return _wrap(func(*_device(args), **plain))

    def __getitem__(self, key: Any) -> Any:
        return _wrap(self._data[_device(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        # cupy copies a host array in here (a transfer of its own): allowed, and not logged
        # as a bucket's move, which the sync makes by get and set alone
        plain = value._data if isinstance(value, ndarray) else value
        self._data[_device(key)] = plain

    def __len__(self) -> int:
        return len(self._data)

    def __bool__(self) -> bool:
        return bool(self._data)

    def __float__(self) -> float:
        return float(self._data)

    def __int__(self) -> int:
        return int(self._data)

    def __index__(self) -> int:
        return self._data.__index__()

    def __repr__(self) -> str:
        return f"fake cupy {self._data!r}"

    def item(self) -> Any:
        return self._data.item()

    def tolist(self) -> Any:
        return self._data.tolist()

    def fill(self, value: Any) -> None:
        self._data.fill(value)

    def copy(self, order: str = "C") -> ndarray:
        return ndarray(self._data.copy(order))

    def astype(self, dtype: Any, order: str = "K", casting: Any = None, copy: bool = True) -> Any:
        return ndarray(self._data.astype(dtype, order=order, copy=copy))

    def view(self, dtype: Any = None) -> ndarray:
        return ndarray(self._data.view() if dtype is None else self._data.view(dtype))

    def reshape(self, *shape: Any, order: str = "C") -> ndarray:
        return ndarray(self._data.reshape(*shape, order=order))

    def ravel(self, order: str = "C") -> ndarray:
        return ndarray(self._data.ravel(order))

    def __getattr__(self, name: str) -> Any:
        """numpy's other methods (sum, max, any, ...), their array results device arrays; not
        numpy's ``__array_interface__`` and the like, which would hand the memory to numpy."""
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._data, name)
        return lambda *args, **kwargs: _wrap(method(*_device(args), **kwargs))

    def get(self, stream: Any = None, order: str = "C", out: Any = None) -> _np.ndarray:
        """A host copy (into ``out`` where given: a contiguous numpy array of this shape and
        dtype, as cupy requires: ValueError for the shape, TypeError for the dtype)."""
        _log("get", self.size)
        if out is None:
            return _np.array(self._data, order=order)
        _check_host(out, self, "get(out=)")
        _np.copyto(out, self._data)
        return out

    def set(self, arr: Any, stream: Any = None) -> None:
        """Copy the host array ``arr`` (same shape and dtype) in."""
        _log("set", self.size)
        _check_host(arr, self, "set()")
        _np.copyto(self._data, arr)


def _check_host(host: Any, device: ndarray, what: str) -> None:
    """Refuse what cupy refuses as the host side of ``get(out=)`` or ``set()``."""
    if type(host) is not _np.ndarray:
        raise TypeError(f"fake cupy: {what} takes a numpy.ndarray, got {type(host).__name__}")
    if host.shape != device.shape:
        raise ValueError(f"fake cupy: {what}: shape mismatch {host.shape} != {device.shape}")
    if host.dtype != device.dtype:
        raise TypeError(f"fake cupy: {what}: {host.dtype} array cannot be set to {device.dtype}")
    if not host.flags.c_contiguous:
        raise RuntimeError(f"fake cupy: {what}: the host array is not contiguous")


def asarray(a: Any, dtype: Any = None) -> ndarray:
    """A device copy of ``a`` (host or device; none where ``a`` is a device array already of
    ``dtype``)."""
    if isinstance(a, ndarray):
        return a if dtype is None or a.dtype == dtype else a.astype(dtype)
    return ndarray(_np.array(a, dtype=dtype))


def __getattr__(name: str) -> Any:
    """numpy's functions (sqrt, multiply, zeros, ...), on and into device arrays."""
    attr = getattr(_np, name)
    if not callable(attr) or isinstance(attr, type):
        return attr

    def on_device(*args: Any, **kwargs: Any) -> Any:
        plain = {k: _device(v) for k, v in kwargs.items()}
        result = attr(*_device(args), **plain)
        out = kwargs.get("out")
        return out if isinstance(out, ndarray) else _wrap(result)

    return on_device


cuda = SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=lambda: 1))
