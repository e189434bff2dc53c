"""A data set whose arrays live on the device (cupy's, which ``as_arrays`` takes): ``fit``'s
scan for NaN before the first step made them numpy arrays implicitly, which cupy refuses.
No GPU here: :class:`DeviceRows` fails where a cupy array does."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.backend import is_gpu_array
from distconv.data import DataError
from tests.test_researcher_data import _data, _trainer


class DeviceRows:
    """Rows on a device as cupy holds them: taken for a device array by the type's module,
    indexed by numpy arrays, copied to the host by ``get()`` alone; never made a numpy array
    implicitly (cupy's TypeError)."""

    __module__ = "cupy"  # what is_gpu_array reads

    def __init__(self, rows: np.ndarray) -> None:
        self._rows = rows

    dtype = property(lambda self: self._rows.dtype)
    shape = property(lambda self: self._rows.shape)
    ndim = property(lambda self: self._rows.ndim)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index):
        return DeviceRows(self._rows[index])

    def get(self) -> np.ndarray:
        return self._rows.copy()

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed")


def _on_device(arrays: dict[str, np.ndarray]) -> dict[str, DeviceRows]:
    return {name: DeviceRows(a) for name, a in arrays.items()}


def test_a_set_on_the_device_trains():
    """It raised "Implicit conversion to a NumPy array is not allowed" before the first step:
    its rows are checked a batch at a time, as the network takes them."""
    assert is_gpu_array(DeviceRows(np.zeros(1)))
    trainer = _trainer()
    before = trainer.network["fc"].weight.value.copy()
    records = trainer.fit(_on_device(_data()), _on_device(_data(16)), epochs=1)
    assert len(records) == 1 and np.isfinite(records[0]["test_loss"])
    assert not np.array_equal(trainer.network["fc"].weight.value, before)


def test_nan_in_a_host_array_beside_a_device_one_is_still_named_by_its_rows():
    train = _data()
    train["x"][5, 0] = np.nan
    train["label"] = DeviceRows(train["label"])
    with pytest.raises(DataError, match=r"the training set's 'x' holds NaN .* 1 row\(s\): row 5$"):
        _trainer().fit(train, epochs=1)
