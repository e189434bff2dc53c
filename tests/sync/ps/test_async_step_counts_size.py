"""An async checkpoint keeps a dense parameter's per-block step counts as runs of rows, not one
count per row: a dense parameter's row is one element, and one int64 count each (what async
checkpoints first kept) made a 4096 x 4096 layer's ``step_per_row`` 128 MiB, twice its float32
values. Real async shards; the counts still go back block by block, from the runs and from that
earlier one-per-row form, and under another block layout a block takes the largest of its rows.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter
from distconv.sync.base import PER_ROW
from distconv.sync.ps.row_counts import RUNS

SHAPE = (64, 64)  # float32: 16 KiB, in 16 blocks of 256 elements (1 KiB)
BLOCK_BYTES, PER_BLOCK = 1024, 256
BLOCKS = SHAPE[0] * SHAPE[1] // PER_BLOCK


def _roundtrip(shards, state_of, mode: str = "async", sparse: bool = False) -> dict:
    """``load_state_dict(state_of(fresh state))`` on 2 fresh shards (of ``mode``), then the
    state the shards hold, as ``state_dict()`` gathers it; ``sparse``: ``w`` a sparse table."""
    endpoints = shards.start(2, workers=1, mode=mode)
    w = Parameter("w", np.zeros(SHAPE, np.float32), sparse_rows=sparse)
    sync = insecure_worker(endpoints, optimizer="adam", lr=0.01, block_bytes=BLOCK_BYTES)
    try:
        sync.setup([w])
        sync.load_state_dict({"w": state_of(sync.state_dict()["w"])})
        return sync.state_dict()["w"]
    finally:
        sync.close()


def _runs(block_counts: list[int]) -> np.ndarray:
    """``[first row, count]`` of each block, blocks of one count merged."""
    pairs = [(k * PER_BLOCK, c) for k, c in enumerate(block_counts)]
    kept = [p for i, p in enumerate(pairs) if i == 0 or pairs[i - 1][1] != p[1]]
    return np.array(kept, dtype=np.int64)


COUNTS = [5, 5, 3, 3, 3, 7, 5, 5, 5, 5, 5, 5, 5, 5, 6, 5]


@pytest.mark.timeout(60)
def test_a_dense_parameters_counts_take_a_few_bytes_a_block(shards):
    def counts_per_block(state):
        return {**state, "step": np.int64(max(COUNTS)), "step" + RUNS: _runs(COUNTS)}

    state = _roundtrip(shards, counts_per_block)
    per_row = {k: v.nbytes for k, v in state.items() if k.endswith(PER_ROW)}
    assert sum(per_row.values()) <= 16 * BLOCKS, per_row  # one [first row, count] a block
    np.testing.assert_array_equal(state["step" + RUNS], _runs(COUNTS))
    assert state["step"] == max(COUNTS)


@pytest.mark.timeout(60)
def test_one_count_per_row_of_an_earlier_async_checkpoint_still_resumes(shards):
    def one_per_row(state):
        rows = np.repeat(np.array(COUNTS, dtype=np.int64), PER_BLOCK)
        earlier = {k: v for k, v in state.items() if k != "step" + RUNS}  # it had no runs
        return {**earlier, "step": np.int64(max(COUNTS)), "step" + PER_ROW: rows}

    state = _roundtrip(shards, one_per_row)
    np.testing.assert_array_equal(state["step" + RUNS], _runs(COUNTS))


@pytest.mark.timeout(60)
def test_a_block_cut_across_runs_of_another_layout_takes_the_largest(shards):
    # runs of the written run's layout end inside block 2 (rows 600, 700) and in block 9
    written = np.array([[0, 4], [600, 9], [700, 2], [2400, 8]], dtype=np.int64)
    expected = [4, 4, 9, 2, 2, 2, 2, 2, 2, 8, 8, 8, 8, 8, 8, 8]

    state = _roundtrip(shards, lambda s: {**s, "step": np.int64(9), "step" + RUNS: written})
    np.testing.assert_array_equal(state["step" + RUNS], _runs(expected))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "runs",
    [
        np.array([[1, 4]]),  # not from row 0
        np.array([[0, 4], [0, 5]]),  # first rows not rising
        np.array([[0, 4], [SHAPE[0] * SHAPE[1], 5]]),  # a row past the parameter's
        np.array([0, 4]),  # not pairs
        np.array([[0.0, 4.0]]),  # not integers
        np.array([[0, -1]]),  # a negative count
    ],
    ids=["start", "order", "past", "flat", "float", "negative"],
)
def test_runs_not_of_their_form_are_refused_naming_the_key(shards, runs):
    with pytest.raises(ValueError, match=r"w/step_runs_per_row"):
        _roundtrip(shards, lambda s: {**s, "step" + RUNS: runs})


@pytest.mark.timeout(60)
def test_a_sync_run_resumed_from_differing_blocks_keeps_them(shards):
    """Sync mode saves no runs while a dense parameter's blocks agree (every sync run), but a
    sync run resumed from an async checkpoint whose blocks differed holds them apart: its own
    checkpoint kept only the largest, and the next resume gave it to every block."""
    counts = _runs(COUNTS)
    state = _roundtrip(shards, lambda s: {**s, "step" + RUNS: counts}, mode="sync")
    np.testing.assert_array_equal(state["step" + RUNS], counts)
    fresh = _roundtrip(shards, lambda s: s, mode="sync")
    assert not [k for k in fresh if k.endswith(PER_ROW)], sorted(fresh)  # as before


@pytest.mark.timeout(60)
def test_a_table_saved_sparse_resumes_dense_taking_its_rows_counts(shards):
    """A sparse table's checkpoint has one count per *table* row (``step_per_row`` of shape
    ``(shape[0],)``); resumed with the table dense (no ``sparse_rows``) it was taken as the
    largest until dense parameters had per-row counts too, and refused since (shape (64,),
    expected (4096,)). Each block now
    takes the largest of the table rows its elements lie in (4 rows of 64 a block here)."""
    table_rows = np.arange(SHAPE[0], dtype=np.int64) % 7

    def saved_sparse(state):
        without_runs = {k: v for k, v in state.items() if k != "step" + RUNS}
        return {**without_runs, "step": np.int64(6), "step" + PER_ROW: table_rows}

    state = _roundtrip(shards, saved_sparse)
    per_block = table_rows.reshape(BLOCKS, -1).max(axis=1).tolist()
    np.testing.assert_array_equal(state["step" + RUNS], _runs(per_block))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "value",
    [np.array(["5"] * (SHAPE[0] * SHAPE[1])), None, [object()] * SHAPE[0]],
    ids=["strings", "none", "objects"],
)
def test_per_row_counts_not_numbers_are_refused_naming_the_key(shards, value):
    """``state_problems`` skips ``K + PER_ROW`` keys (other syncs ignore them), so nothing
    checked their values: digit strings were read as counts, None as no per-row counts (each
    block given the largest), and objects raised a bare TypeError naming no key."""

    def per_row(state):
        without_runs = {k: v for k, v in state.items() if k != "step" + RUNS}
        return {**without_runs, "step" + PER_ROW: value}

    with pytest.raises(ValueError, match=r"w/step_per_row: a \w+ .*not an array of numbers"):
        _roundtrip(shards, per_row)


@pytest.mark.timeout(60)
def test_a_parameter_saved_dense_resumes_as_a_table_taking_its_runs(shards):
    """The other way: runs of elements (a dense parameter's), resumed with the parameter a
    sparse table, were ignored, every block given the largest count. Each block now takes
    the largest of the elements its table rows hold (4 rows of 64, one block of 256, here)."""

    def saved_dense(state):
        without_rows = {k: v for k, v in state.items() if k != "step" + PER_ROW}
        return {**without_rows, "step": np.int64(max(COUNTS)), "step" + RUNS: _runs(COUNTS)}

    state = _roundtrip(shards, saved_dense, sparse=True)
    table_rows = SHAPE[0] // BLOCKS
    np.testing.assert_array_equal(state["step" + PER_ROW], np.repeat(COUNTS, table_rows))


@pytest.mark.timeout(60)
def test_one_count_per_element_resumes_as_a_table_taking_its_rows(shards):
    """An earlier async checkpoint's one count per element (``step_per_row`` of shape
    (4096,)), resumed with the parameter a sparse table, was refused: "has shape (4096,),
    expected (64,)". Each block now takes the largest of its table rows' elements."""

    def per_element(state):
        rows = np.repeat(np.array(COUNTS, dtype=np.int64), PER_BLOCK)
        return {**state, "step": np.int64(max(COUNTS)), "step" + PER_ROW: rows}

    state = _roundtrip(shards, per_element, sparse=True)
    table_rows = SHAPE[0] // BLOCKS
    np.testing.assert_array_equal(state["step" + PER_ROW], np.repeat(COUNTS, table_rows))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "bad, sparse",
    [(-1, False), (np.nan, False), (2.5, False), (-1, True), (np.inf, True)],
    ids=["negative", "nan", "fraction", "negative-table", "inf-table"],
)
def test_per_row_counts_not_whole_and_positive_are_refused_naming_the_key(shards, bad, sparse):
    """Runs refuse a negative count, but one count per row (or per element) took any number:
    -1 went to the shards as a step count (Adam's bias correction of a step never taken), NaN
    as -2**63 (numpy's cast), 2.5 as 2. A count is a whole number >= 0 in every form."""
    with pytest.raises(ValueError, match=r"w/step_per_row: .*not a count"):
        _roundtrip(shards, _last_block_counts(bad, np.float64, sparse), sparse=sparse)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bad", [2.0**63, np.uint64(2**63)], ids=["float", "uint64"])
def test_per_row_counts_past_int64_are_refused_naming_the_key(shards, bad):
    """The shards keep a count as int64: a whole number >= 0 past its largest went there as
    -2**63 (numpy's cast), Adam's bias correction of a step count never taken."""
    with pytest.raises(ValueError, match=r"w/step_per_row: holds 9\.?22.*not a count .*2\*\*63"):
        _roundtrip(shards, _last_block_counts(bad, np.asarray(bad).dtype))


def _last_block_counts(bad, dtype, sparse: bool = False):
    """A ``state_of`` for :func:`_roundtrip`: one count per row (of ``dtype``), 3 but for the
    last block's rows, ``bad`` (taken as that block's count), and no runs."""
    rows = SHAPE[0] if sparse else SHAPE[0] * SHAPE[1]

    def per_row(state):
        counts = np.full(rows, 3, dtype=dtype)
        counts[-(rows // BLOCKS) :] = bad
        without_runs = {k: v for k, v in state.items() if k != "step" + RUNS}
        return {**without_runs, "step": np.int64(3), "step" + PER_ROW: counts}

    return per_row


@pytest.mark.timeout(60)
def test_whole_counts_given_as_floats_still_resume(shards):
    """A count array of floats holding whole numbers (a checkpoint converted by another tool)
    resumes as before: only what is no count is refused."""

    def per_row(state):
        counts = np.repeat(np.array(COUNTS, dtype=np.float64), PER_BLOCK)
        without_runs = {k: v for k, v in state.items() if k != "step" + RUNS}
        return {**without_runs, "step": np.int64(max(COUNTS)), "step" + PER_ROW: counts}

    state = _roundtrip(shards, per_row)
    np.testing.assert_array_equal(state["step" + RUNS], _runs(COUNTS))


def _scalar_count(count):
    """A ``state_of`` for :func:`_roundtrip`: ``step`` set to ``count``, no per-row key (a sync
    run's checkpoint, or one before per-row counts), so every block takes ``step``."""

    def scalar(state):
        return {**{k: v for k, v in state.items() if not k.endswith(PER_ROW)}, "step": count}

    return scalar


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "bad, sparse, mode",
    [
        (np.int64(-1), False, "sync"),
        (np.float64(np.nan), False, "async"),
        (np.float64(2.5), True, "sync"),
        (np.float64(2.0**63), True, "async"),
    ],
    ids=["negative", "nan", "fraction-table", "past-int64-table"],
)
def test_a_scalar_count_that_is_no_count_is_refused_naming_the_key(shards, bad, sparse, mode):
    """Without a per-row key every block takes ``step``: -1 went to the shards as a step
    count, NaN and 2**63 as -2**63, 2.5 as 2, as the per-row forms' did."""
    with pytest.raises(ValueError, match=r"w/step: holds .*not a count"):
        _roundtrip(shards, _scalar_count(bad), mode=mode, sparse=sparse)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("count", [np.int64(4), np.float64(4.0), 4], ids=["int", "float", "py"])
def test_a_scalar_count_resumes_every_block(shards, count):
    """A count of any whole-number form without a per-row key: every block takes it."""
    state = _roundtrip(shards, _scalar_count(count))
    np.testing.assert_array_equal(state["step" + RUNS], [[0, 4]])
