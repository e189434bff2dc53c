"""segment_sums: runs of consecutive rows summed, empty runs to zeros, 16-bit rows in float32,
on the host's reduceat and on the device's scatter (run here on numpy)."""

import ml_dtypes
import numpy as np
import pytest

from distconv.kernels import rows as rows_module
from distconv.kernels.rows import segment_sums

#: empty runs first, between, in a row and last: reduceat at equal offsets gives a row, not 0
LENGTHS = [0, 2, 0, 0, 1, 3, 0]


def _starts(lengths: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _by_slices(rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The definition: each run's rows summed, in float64."""
    wide = rows.astype(np.float64)
    return np.stack([wide[s:e].sum(axis=0) for s, e in zip(starts[:-1], starts[1:])])


@pytest.fixture(params=[False, True], ids=["host", "device"])
def device(request, monkeypatch):
    """``True`` runs the cupy branch (a RowScatter) on numpy arrays, as cupy would run it."""
    monkeypatch.setattr(rows_module, "is_gpu_array", lambda a: request.param)
    return request.param


@pytest.mark.parametrize("lengths", [LENGTHS, [4, 1, 2], [0, 0], [3]], ids=str)
def test_each_run_sums_its_rows_and_an_empty_one_is_zeros(rng, device, lengths):
    starts = _starts(lengths)
    rows = rng.standard_normal((int(starts[-1]), 3))
    got = segment_sums(rows, starts)
    assert got.shape == (len(lengths), 3) and got.dtype == rows.dtype
    np.testing.assert_allclose(got, _by_slices(rows, starts), rtol=1e-14, atol=0)


def test_rows_of_a_strided_view_are_read_as_they_are_and_left(rng, device):
    table = rng.standard_normal((6, 8))
    rows, kept = table[:, ::2], table.copy()
    starts = _starts([2, 0, 4])
    np.testing.assert_allclose(segment_sums(rows, starts), _by_slices(rows, starts), rtol=1e-14)
    np.testing.assert_array_equal(table, kept)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_16_bit_runs_are_added_in_float32(device, dtype):
    """4096 ones: numpy's bfloat16 sum stops at 256, float16's add.at at 2048."""
    got = segment_sums(np.ones((4096, 2), dtype), _starts([0, 4096]), np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [[0, 0], [4096, 4096]])


def test_no_rows_and_no_runs(device):
    assert segment_sums(np.zeros((0, 5)), _starts([])).shape == (0, 5)
    np.testing.assert_array_equal(segment_sums(np.zeros((0, 2)), _starts([0, 0])), np.zeros((2, 2)))
