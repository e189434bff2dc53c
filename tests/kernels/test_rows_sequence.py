"""The row and sequence kernels: scatter-adds, column compaction, offsets and context windows."""

import numpy as np
import pytest

from distconv.kernels.rows import RowScatter, compact_columns
from distconv.kernels.sequence import check_offsets, context_index, segment_ids

# uneven lengths, an empty sequence and one shorter than every window
SEQ_STARTS = np.array([0, 4, 4, 5, 11, 13])


def test_row_scatter_sums_repeated_rows(rng):
    index = np.array([4, 1, 4, 4, 0, 1])
    rows = rng.standard_normal((6, 3))
    keep = np.array([True, True, True, False, True, True])
    for k in (None, keep):
        target = np.ones((5, 3))
        RowScatter(index, k).add(target, rows)
        want = np.ones((5, 3))
        np.add.at(want, index if k is None else index[k], rows if k is None else rows[k])
        np.testing.assert_allclose(target, want, rtol=1e-14)
    RowScatter(np.array([], dtype=int)).add(target, rows[:0])  # nothing to add: no error


@pytest.mark.parametrize("k,width", [(3, 10), (4, 4), (6, 5), (0, 5)])  # 0: none selected
def test_compact_columns_against_add_at(rng, k, width):
    cols = np.stack([rng.choice(width, k, replace=k > width) for _ in range(5)])
    cols[0, :2] = 1  # a column picked twice by one sample collects both
    dz = rng.standard_normal(cols.shape)
    used, d = compact_columns(dz, cols, width)
    full = np.zeros((5, width))
    np.add.at(full, (np.arange(5)[:, None], cols), dz)
    np.testing.assert_allclose(d, full[:, used], rtol=1e-14)
    if isinstance(used, slice):
        assert len(np.unique(cols)) == width
    else:
        np.testing.assert_array_equal(used, np.unique(cols))


def test_segment_ids_skip_empty_segments():
    np.testing.assert_array_equal(segment_ids(np.array([0, 2, 2, 5]), 5), [0, 0, 2, 2, 2])


def _context_index_by_repeat(starts, start, length, begin_pad):
    """The host version the context projection used before: ``np.repeat`` over lengths."""
    lengths = np.diff(starts)
    n = int(starts[-1])
    seq = np.repeat(np.arange(len(lengths)), lengths)
    first, size = starts[:-1][seq, None], lengths[seq, None]
    rel = (np.arange(n)[:, None] - first) + start + np.arange(length)
    before, after = rel < 0, rel >= size
    pad = np.where(before, begin_pad + rel, begin_pad + rel - size)
    outside = before | after
    return np.where(outside, n + pad, first + rel), outside


@pytest.mark.parametrize("length,start", [(3, -1), (2, -3), (4, 1), (1, 0), (6, -3), (3, 2)])
def test_context_index_matches_the_host_version(length, start):
    begin_pad = max(0, -start)
    index, outside = context_index(SEQ_STARTS, 13, start, length, begin_pad)
    want_index, want_outside = _context_index_by_repeat(SEQ_STARTS, start, length, begin_pad)
    np.testing.assert_array_equal(index, want_index)
    np.testing.assert_array_equal(outside, want_outside)


def test_context_index_names_padding_rows():
    # one sequence of 2 rows, window of 4 starting 2 rows back: begin_pad 2, end_pad 1
    index, outside = context_index(np.array([0, 2]), 2, -2, 4, 2)
    # input rows are 0..1, padding rows 2 + k
    np.testing.assert_array_equal(index, [[2, 3, 0, 1], [3, 0, 1, 4]])
    np.testing.assert_array_equal(outside, [[1, 1, 0, 0], [1, 0, 0, 1]])


@pytest.mark.parametrize(
    "starts,match",
    [
        (None, "seq_starts are missing"),
        (np.array([[0, 3]]), r"1-D integer array of n \+ 1 offsets, got shape \(1, 2\)"),
        (np.array([0.0, 3.0]), "dtype float64"),
        (np.array([0, 2]), r"rise from 0 to the row count 3, got \[0, 2\] \(length 2\)"),
        (np.array([0, 2, 1, 3]), "rise from 0"),
    ],
)
def test_check_offsets_names_the_problem(starts, match):
    with pytest.raises(ValueError, match=match):
        check_offsets(starts, 3)
    assert check_offsets([0, 1, 3], 3).tolist() == [0, 1, 3]


@pytest.mark.parametrize("device", [False, True])
def test_row_scatter_sums_16_bit_rows_in_float32(monkeypatch, device):
    """ml_dtypes' reduceat adds bfloat16 in bfloat16 and add.at adds float16 in float16: 4096
    rows of ones into one target row gave 256 and 2048. ``device`` runs the GPU branch (add.at)
    on numpy arrays, as cupy would run it."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from distconv.kernels import rows as rows_module

    monkeypatch.setattr(rows_module, "is_gpu_array", lambda a: device)
    n = 4096
    for dtype in (np.float16, ml_dtypes.bfloat16):
        target = np.zeros((3, 2), dtype)
        RowScatter(np.full(n, 1)).add(target, np.ones((n, 2), dtype))
        np.testing.assert_array_equal(target.astype(np.float64), [[0, 0], [n, n], [0, 0]])
