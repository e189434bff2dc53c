"""``distconv.arg.not_finite``, the check ``Trainer.fit`` makes of its data sets before the
first step: the rows named across chunk boundaries, their count, and reads of about its chunk
size whatever the width of a row (4096 rows of 224x224 RGB images had made about 600 MB of
temporaries a chunk)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.arg import not_finite
from distconv.data import DataError
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.optim import SGD
from distconv.sync.local import LocalSync
from tests.test_researcher_data import _data

pytestmark = pytest.mark.timeout(30)


class _Rows:
    """A data set read by rows (a memory-mapped or HDF5 set), recording each read's rows."""

    def __init__(self, a: np.ndarray) -> None:
        self._a, self.dtype, self.shape, self.reads = a, a.dtype, a.shape, []

    def __len__(self) -> int:
        return len(self._a)

    def __getitem__(self, rows: slice) -> np.ndarray:
        part = self._a[rows]
        self.reads.append(len(part))
        return part


@pytest.mark.parametrize("chunk_bytes", [1, 24, 40, 1 << 20])
def test_the_rows_holding_nan_or_infinity_are_counted_and_the_first_five_named(chunk_bytes):
    a = np.zeros((100, 3), np.float32)
    a[[7, 8, 50, 99], 1] = np.nan
    a[[60, 61], 0] = np.inf
    where = not_finite({"ids": np.arange(100), "x": a}, chunk_bytes=chunk_bytes)
    assert where == "'x' holds NaN or infinity in 6 row(s): rows 7, 8, 50, 60, 61 ..."
    a[[8, 50, 60, 61, 99]] = 0
    one = "'x' holds NaN or infinity in 1 row(s): row 7"
    assert not_finite({"x": a}, chunk_bytes=chunk_bytes) == one
    a[7] = 0
    assert not_finite({"x": a}, chunk_bytes=chunk_bytes) is None


def test_wide_rows_are_read_a_chunk_of_bytes_at_a_time():
    images = _Rows(np.zeros((64, 3, 32, 32), np.float32))  # 12 KiB a row
    images._a[40, 2, 5, 5] = np.nan
    where = not_finite({"image": images}, chunk_bytes=64 << 10)
    assert where == "'image' holds NaN or infinity in 1 row(s): row 40"
    assert max(images.reads) == 5 and sum(images.reads) == 64  # 64 KiB / 12 KiB, each row once


def test_a_value_infinite_as_the_type_it_trains_in_is_named_by_its_rows():
    """The scan read each set as it was, not as fed: 1e5 fits float32 but is infinite as
    float16, so a set trained in float16 passed, and the network refused the batch by feed
    alone (a test set's after a whole epoch of training)."""
    x = np.zeros((40, 3), np.float32)
    x[[9, 30], 2] = [1e5, -7e4]
    assert not_finite({"x": x}) is None
    assert not_finite({"x": x}, np.dtype(np.float16), chunk_bytes=24) == (
        "'x' holds NaN or infinity in 2 row(s) as float16, the type it trains in: rows 9, 30"
    )
    assert not_finite({"x": x.astype(np.float64)}, np.dtype(np.float32)) is None


def test_fit_in_float16_names_a_test_row_past_its_range_before_a_step():
    """The row stopped the fit only at the evaluation after a whole epoch of training, by
    the batch's feed alone ("input 'x' of shape (64, 4) holds 1 NaN or infinite values")."""
    net = Network()
    net.add("fc", FullyConnected(4, 3), "x")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    trainer = Trainer(net, LocalSync(SGD(lr=0.1)), batch_size=8, dtype="float16")
    test = _data()
    test["x"][50, 0] = 1e5
    before = net["fc"].weight.value.copy()
    with pytest.raises(DataError, match=r"^the test set's 'x' .* as float16, .*: row 50$"):
        trainer.fit(_data(), test, epochs=1)
    np.testing.assert_array_equal(net["fc"].weight.value, before)  # no step ran
