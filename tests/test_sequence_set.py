"""``SequenceSet``: each rule it checks when made, refused with a DataError naming the set, the
array and the rule; the rows of a batch of sequences gathered as a loop over them would, with
their offsets; its count; its fingerprint, which holds every offset."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.data import DataError, fingerprint
from distconv.sequence_set import SequenceSet

STARTS = np.array([0, 2, 2, 5, 6])  # 4 sentences, the second empty
TOKENS = np.arange(10, 16)


def made(rows=None, starts=STARTS, per=None, **kw):
    return SequenceSet({"tok": TOKENS} if rows is None else rows, starts, per, name="s", **kw)


@pytest.mark.parametrize(
    ("starts", "said"),
    [
        ([0, 2, 6], "seq_starts must be a 1-D numpy array of n \\+ 1 integer offsets, got list"),
        (np.array([0.0, 6.0]), "integer offsets, got float64 shape \\(2,\\)"),
        (np.array([[0, 6]]), "integer offsets, got int64 shape \\(1, 2\\)"),
        (np.array([], np.int64), "integer offsets, got int64 shape \\(0,\\)"),
        (np.array([1, 6]), "seq_starts must start at 0, got 1"),
        (np.array([0, 4, 3, 6]), "seq_starts must never fall, but goes from 4 to 3 at 2"),
        (np.array([0, 2, 5]), "rows\\['tok'\\] must be a numpy array of 5 rows \\(seq_starts"),
        (np.array([0, 2, 7]), "rows\\['tok'\\] must be a numpy array of 7 rows"),
    ],
)
def test_offsets_that_break_a_rule_are_refused_naming_it(starts, said):
    with pytest.raises(DataError, match=said) as caught:
        made(starts=starts)
    assert str(caught.value).startswith("s: ")  # the set's name


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"rows": {}}, "rows holds no feed; a sequence set needs one row array"),
        ({"rows": [TOKENS]}, "rows must be a dict of numpy arrays by feed name, got list"),
        ({"rows": {"tok": TOKENS.tolist()}}, "rows\\['tok'\\] must be a numpy array of 6 rows"),
        ({"rows": {"tok": np.int64(3)}}, "rows\\['tok'\\] must be a numpy array of 6 rows"),
        ({"per": {"y": np.zeros(3)}}, "per_sequence\\['y'\\] must be a numpy array of 4 entries"),
        ({"per": {"tok": np.zeros(4)}}, "'tok' is in both rows and per_sequence; name it once"),
        ({"per": ("y",)}, "per_sequence must be a dict of numpy arrays by feed name, got tuple"),
        ({"mean_over": "tokens"}, "mean_over must be one of \\('rows', 'sequences'\\) or None"),
        (
            {"rows": {"tok": TOKENS[:0]}, "starts": np.array([0, 0, 0])},
            "its 2 sequence\\(s\\) hold no rows \\(all are empty\\)",
        ),
    ],
)
def test_arrays_that_break_a_rule_are_refused_naming_them(kw, said):
    with pytest.raises(DataError, match=f"^s: {said}"):
        made(**kw)


def test_an_empty_set_is_made_and_fit_refuses_it_as_any_empty_set():
    assert len(made(rows={"tok": TOKENS[:0]}, starts=np.array([0]))) == 0


def test_a_batch_gathers_its_sequences_rows_in_index_order_with_their_offsets():
    labels = np.array([7, 8, 9, 6])
    s = made(per={"y": labels})
    rng = np.random.default_rng(0)
    for index in [
        np.array([3, 0, 1]),
        np.array([1]),
        np.array([], np.int64),
        rng.integers(0, 4, 9),
    ]:
        feeds = s.feeds(index, np.float32)
        by_loop = [TOKENS[STARTS[i] : STARTS[i + 1]] for i in index]
        expected = np.concatenate([np.zeros(0, TOKENS.dtype), *by_loop])
        assert feeds["tok"].ids.tolist() == expected.tolist()
        offsets = np.concatenate([[0], np.cumsum([len(r) for r in by_loop])])
        assert feeds["tok"].seq_starts.tolist() == offsets.tolist()
        assert feeds["y"].ids.tolist() == [int(labels[i]) for i in index]
        assert s.count(index) == len(expected)


def test_float_rows_are_cast_to_the_trainers_dtype_and_ids_are_not():
    s = made(rows={"tok": TOKENS, "x": np.ones((6, 2))})
    feeds = s.feeds(np.array([2, 0]), np.float32)
    assert feeds["x"].value.dtype == np.float32 and feeds["x"].seq_starts.tolist() == [0, 3, 5]
    assert feeds["tok"].ids.dtype == TOKENS.dtype and feeds["tok"].value is None


def test_the_fingerprint_holds_every_offset():
    ours = fingerprint(made())
    assert ours == fingerprint(made(rows={"tok": TOKENS.copy()}, starts=STARTS.copy()))
    other = fingerprint(made(starts=np.array([0, 2, 3, 5, 6])))  # one boundary moved
    assert other["examples"] == ours["examples"] and other["rows"] == ours["rows"]
    assert other["sampled_examples_sha256"] != ours["sampled_examples_sha256"]
    assert ours["examples"] == 4 and ours["rows"] == 6
