"""``Trainer.fit`` refuses an id past what the layer reading its feed takes (a table's rows, a
multiplex's candidates, a selective FC's columns) before its first step, naming the set, the
feed, the range, the reader and the rows. The layer's own check of each batch stopped a fit at
the step that drew the row, 200 to 400 steps into a run (a resume met it again), naming the
layer and neither the feed nor the row."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.data import DataError
from distconv.data_checks import refuse_ids_out_of_range, rows_outside
from distconv.id_reads import IdRead, id_reads
from distconv.layers import (
    Concatenate2,
    DotMulOperator,
    FullMatrixProjection,
    FullyConnected,
    LayerError,
    Mixed,
    Multiplex,
    SelectiveFullyConnected,
    SoftmaxCrossEntropy,
    TableProjection,
)
from distconv.optim import SGD
from distconv.sequence_set import SequenceSet
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(60)

ROWS = 64


def _embedding() -> tuple[Network, dict[str, np.ndarray]]:
    """A table of 10 rows read from the feed 'tok'."""
    rng = np.random.default_rng(0)
    net = Network()
    net.add("emb", Mixed([TableProjection(10, 4)]), "tok")
    net.add("fc", FullyConnected(4, 3), "emb")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    return net, {"tok": rng.integers(0, 10, ROWS), "label": rng.integers(0, 3, ROWS)}


def _multiplex() -> tuple[Network, dict[str, np.ndarray]]:
    """'choice' picks each row from one of two candidate feeds."""
    rng = np.random.default_rng(1)
    net = Network()
    net.add("mp", Multiplex(), ["choice", "a", "b"])
    net.add("fc", FullyConnected(4, 3), "mp")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    data = {
        "choice": rng.integers(0, 2, ROWS),
        "a": rng.standard_normal((ROWS, 4)).astype(np.float32),
        "b": rng.standard_normal((ROWS, 4)).astype(np.float32),
        "label": rng.integers(0, 3, ROWS),
    }
    return net, data


def _selective() -> tuple[Network, dict[str, np.ndarray]]:
    """'cols' selects 3 of 20 output columns a row; the label is a position among them."""
    rng = np.random.default_rng(2)
    net = Network()
    net.add("sfc", SelectiveFullyConnected(4, 20), ["x", "cols"])
    net.add("loss", SoftmaxCrossEntropy(), ["sfc", "label"])
    data = {
        "x": rng.standard_normal((ROWS, 4)).astype(np.float32),
        "cols": rng.integers(0, 20, (ROWS, 3)),
        "label": rng.integers(0, 3, ROWS),
    }
    return net, data


#: each model, the feed it reads as ids, the id past its range, and what the refusal names
MODELS = {
    "table": (
        _embedding,
        "tok",
        10,
        r"outside \[-1, 10\), the ids TableProjection 'proj0' of Mixed 'emb' reads; its ids lie "
        r"in \[\d, 10\]",
    ),
    "multiplex": (
        _multiplex,
        "choice",
        2,
        r"outside \[0, 2\), the ids Multiplex 'mp' reads; its ids lie in \[0, 2\]",
    ),
    "selective": (
        _selective,
        "cols",
        20,
        r"outside \[0, 20\), the ids SelectiveFullyConnected 'sfc' reads; its ids lie in "
        r"\[0, 20\]",
    ),
}


def _trainer(net: Network, out_dir=None) -> Trainer:
    return Trainer(
        net,
        LocalSync(SGD(lr=0.1)),
        batch_size=8,
        out_dir=out_dir,
        checkpoint_every=1,
        progress=False,
    )


@pytest.mark.parametrize("model", sorted(MODELS))
def test_an_id_past_its_range_in_the_last_row_is_refused_before_the_first_step(model, tmp_path):
    build, feed, bad, names = MODELS[model]
    net, data = build()
    data[feed][-1] = bad  # a selection's whole row: one column past would do
    trainer = _trainer(net, tmp_path / "run")
    before = {p.name: p.value.copy() for p in trainer.params}
    said = rf"^the training set's {feed!r} holds 1 row\(s\) {names}: row {ROWS - 1}$"
    with pytest.raises(DataError, match=said):
        trainer.fit(data, epochs=1)
    assert trainer.pos.step == 0 and trainer.history == []
    assert not list((tmp_path / "run").rglob("step-*")), "a checkpoint was written"
    for p in trainer.params:
        np.testing.assert_array_equal(p.value, before[p.name], err_msg=p.name)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_test_set_id_past_its_range_is_refused_before_an_epoch_trains(model):
    """A test set's stopped the fit only in the first epoch's evaluation."""
    build, feed, bad, names = MODELS[model]
    net, train = build()
    _, test = build()
    test[feed][[5, 9]] = bad
    said = rf"^the test set's {feed!r} holds 2 row\(s\) {names}: rows 5, 9$"
    trainer = _trainer(net)
    with pytest.raises(DataError, match=said):
        trainer.fit(train, test, epochs=1)
    assert trainer.history == []


def test_a_tables_no_row_id_is_taken_and_one_below_it_refused():
    net, data = _embedding()
    data["tok"][[3, 4]] = -1  # padding: no row, as the layer reads it
    assert len(_trainer(net).fit(data, epochs=1)) == 1
    data["tok"][40] = -2
    said = r"^the training set's 'tok' holds 1 row\(s\) outside \[-1, 10\), .* \[-2, 9\]: row 40$"
    with pytest.raises(DataError, match=said):
        _trainer(_embedding()[0]).fit(data, epochs=1)


def test_a_sequence_sets_id_is_named_by_its_sequence():
    net, _ = _embedding()
    starts = np.array([0, 3, 3, 7])
    tok = np.array([1, 2, 3, 4, 5, 6, 7])
    tok[5] = 11
    data = SequenceSet({"tok": tok, "label": np.zeros(7, np.int64)}, starts, name="s")
    said = r"^the training set's 'tok' holds 1 row\(s\) outside \[-1, 10\), .*: "
    said += r"row 5 \(row 2 of sequence 2\)$"
    with pytest.raises(DataError, match=said):
        _trainer(net).fit(data, epochs=1)


def test_ids_a_layer_computes_are_its_own_to_check_at_forward():
    """Only a feed wired straight to an id input is read up front: a multiplex choosing among
    a layer's outputs declares its choice feed, and a selective FC run without a selection
    declares none."""
    net = Network()
    net.add("sfc", SelectiveFullyConnected(4, 20), ["x"])
    net.add("mp", Multiplex(), ["choice", "sfc", "sfc"])
    net.add("loss", SoftmaxCrossEntropy(), ["mp", "label"])
    assert id_reads(net) == [IdRead("choice", "Multiplex 'mp'", 0, 2)]


def test_a_layer_wired_to_too_few_or_too_many_inputs_keeps_its_own_words():
    """A multiplex of no candidate, a selective FC of one input too many, or a Mixed of two
    tables wired to one feed, would otherwise be told its ids lie outside a range it cannot
    have, or one of another input's."""
    net = Network()
    net.add("mp", Multiplex(), ["choice"])
    net.add("sfc", SelectiveFullyConnected(4, 20), ["x", "cols", "more"])
    net.add("emb", Mixed([TableProjection(10, 4), TableProjection(5, 4)]), ["tok"])
    assert id_reads(net) == []
    data = {"choice": np.zeros(8, np.int64), "label": np.zeros(8, np.int64)}
    net = Network()
    net.add("mp", Multiplex(), ["choice"])
    net.add("loss", SoftmaxCrossEntropy(), ["mp", "label"])
    with pytest.raises(LayerError, match=r"^Multiplex 'mp': expected 2 to any number input"):
        _trainer(net).fit(data, epochs=1)


@pytest.mark.parametrize("chunk_bytes", [1, 24, 1 << 20])
def test_ids_outside_a_range_are_counted_across_chunks(chunk_bytes):
    ids = np.arange(100) % 4 - 1
    ids[[3, 50, 90]] = [-2, 3, 7]
    assert rows_outside(ids, -1, 3, chunk_bytes) == (3, [3, 50, 90], -2, 7)
    assert rows_outside(ids.reshape(25, 4), -1, 3, chunk_bytes) == (3, [0, 12, 22], -2, 7)


def test_a_layer_built_of_projections_answers_with_the_projection_of_each_input():
    """A Mixed's or a Concatenate2's id_range is its projection's, as any layer's is its own;
    an input only operators read, or one of values, takes no ids."""
    table = Mixed([TableProjection(10, 4)])
    assert table.id_range(0, 1) == (-1, 10)
    both = Concatenate2([FullMatrixProjection(3, 2), TableProjection(7, 2)])
    assert [both.id_range(i, 2) for i in range(2)] == [None, (-1, 7)]
    dot = Mixed([None, None], [DotMulOperator()], size=3)
    assert [dot.id_range(i, 2) for i in range(2)] == [None, None]
    net = Network()
    net.add("c2", both, ["x", "tok"])
    assert id_reads(net) == [IdRead("tok", "TableProjection 'proj1' of Concatenate2 'c2'", -1, 7)]


def test_ids_counted_from_one_are_told_they_count_from_zero():
    """Ids 1 to 10 for a table of 10 rows: the words the label check gives labels 1 to k."""
    net, data = _embedding()
    data["tok"] = data["tok"] % 10 + 1
    said = r"outside \[-1, 10\), .*; its ids lie in \[1, 10\] \(ids count from 0\): rows \d"
    with pytest.raises(DataError, match=said):
        _trainer(net).fit(data, epochs=1)


def test_a_loop_of_ones_own_checks_each_feeds_set_as_fit_does():
    """docs/operations.md "Sequences": a SequenceConcat's question and answer, one set each, are
    read by refuse_ids_out_of_range one set at a time (the other's feeds absent)."""
    net = Network()
    net.add("eq", Mixed([TableProjection(10, 4)]), "q")
    net.add("ea", Mixed([TableProjection(10, 4)]), "a")
    starts = np.array([0, 2, 5])
    q = SequenceSet({"q": np.array([1, 2, 3, 4, 5])}, starts, {"label": np.zeros(2, np.int64)})
    a = SequenceSet({"a": np.array([1, 2, 3, 10, 5])}, starts)
    refuse_ids_out_of_range(net, q, None)
    said = r"^the training set's 'a' holds 1 row\(s\) .* 'ea' reads; "
    said += r".*: row 3 \(row 1 of sequence 1\)$"
    with pytest.raises(DataError, match=said):
        refuse_ids_out_of_range(net, a, None)
