"""``distconv.arg.not_finite``, the check ``Trainer.fit`` makes of its data sets before the
first step: the rows named across chunk boundaries, their count, and reads of about its chunk
size whatever the width of a row (4096 rows of 224x224 RGB images had made about 600 MB of
temporaries a chunk)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import not_finite

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
    where = not_finite({"ids": np.arange(100), "x": a}, chunk_bytes)
    assert where == "'x' holds NaN or infinity in 6 row(s): 7, 8, 50, 60, 61 ..."
    a[[8, 50, 60, 61, 99]] = 0
    assert not_finite({"x": a}, chunk_bytes) == "'x' holds NaN or infinity in 1 row(s): 7"
    a[7] = 0
    assert not_finite({"x": a}, chunk_bytes) is None


def test_wide_rows_are_read_a_chunk_of_bytes_at_a_time():
    images = _Rows(np.zeros((64, 3, 32, 32), np.float32))  # 12 KiB a row
    images._a[40, 2, 5, 5] = np.nan
    where = not_finite({"image": images}, chunk_bytes=64 << 10)
    assert where == "'image' holds NaN or infinity in 1 row(s): 40"
    assert max(images.reads) == 5 and sum(images.reads) == 64  # 64 KiB / 12 KiB, each row once
