"""``Dataset`` refuses NaN and infinity in its images as before, reading them a chunk at a time
(:func:`distconv.arg.not_finite`, the Trainer's scan): it built a mask of the whole image array
at once, one byte per value (about 120 MiB at the wrap of a 470 MiB set, and a memory-mapped
set's pages read in whole besides)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from distconv.arg import NOT_FINITE_CHUNK_BYTES
from distconv.data import DataError, Dataset

pytestmark = pytest.mark.timeout(30)


def test_the_refusal_counts_the_values_and_names_the_rows():
    x = np.zeros((50, 1, 2, 2), np.float32)
    x[[3, 3, 41], 0, [0, 1, 1], [0, 1, 0]] = [np.nan, np.inf, -np.inf]
    with pytest.raises(DataError) as raised:
        Dataset(x, np.zeros(50, np.int64), 2, "mine")
    assert str(raised.value) == "mine: images hold 3 NaN or infinite values in 2 row(s): rows 3, 41"


def test_a_set_larger_than_a_chunk_is_refused_from_its_last_row():
    x = np.zeros((1000, 3, 32, 32), np.float32)  # 12 MiB a 1000 rows: several chunks of rows
    x[999, 2, 31, 31] = np.nan
    with pytest.raises(
        DataError, match=r"^s: images hold 1 NaN or infinite values in 1 row\(s\): row 999$"
    ):
        Dataset(x, np.zeros(1000, np.int64), 2, "s")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_the_check_holds_a_chunk_not_a_mask_of_the_whole_set(dtype):
    """64 MiB of images: the whole mask was 16 MiB in float32, 32 MiB in float16; a chunk's
    mask is at most half a chunk's bytes (float16's; none at all where the dot product proves a
    float32 chunk finite), whatever the size of the set."""
    x = np.zeros(((64 << 20) // np.dtype(dtype).itemsize // 1024, 1, 32, 32), dtype)
    x[:] = 0.5  # touched: no lazily zeroed pages
    y = np.zeros(len(x), np.int64)
    tracemalloc.start()
    try:
        Dataset(x, y, 2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < NOT_FINITE_CHUNK_BYTES * 5 // 8, (peak, x.nbytes)


def test_a_read_only_set_proved_finite_is_not_read_again_by_fit(tmp_path):
    """A memory-mapped set is read once for the Dataset and fit together: fit's scan
    (:func:`~distconv.arg.not_finite_once`) skips an array the Dataset's proved finite."""
    from distconv.arg import _proved_finite

    np.save(tmp_path / "x.npy", np.full((8, 1, 2, 2), 0.5, np.float32))
    x = np.load(tmp_path / "x.npy", mmap_mode="r")
    assert not _proved_finite(x, "")
    Dataset(x, np.zeros(8, np.int64), 2)
    assert _proved_finite(x, "")  # as fed with no dtype: the Trainer's default
