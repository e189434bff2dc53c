"""Sparse rows in the model: the ``sparse_rows`` flag, which layers set it, and
``Network.rows_needed``: the rows a pass reads, known from its feeds before forward."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg, Parameter
from distconv.init import set_seed
from distconv.layers import (
    FullMatrixProjection,
    FullyConnected,
    Mixed,
    MSELoss,
    SelectiveFullyConnected,
    TableProjection,
)
from distconv.network import Network, NetworkError
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer


def _ids(*values) -> Arg:
    return Arg(ids=np.array(values), needs_grad=False)


def _rows(net: Network, feeds) -> dict[str, list[int]]:
    return {k: v.tolist() for k, v in net.rows_needed(feeds).items()}


# -- the flag ----------------------------------------------------------------------------------
def test_the_flag_is_off_by_default_and_refused_on_a_scalar():
    assert not Parameter("w", np.zeros((3, 2))).sparse_rows
    assert Parameter("w", np.zeros((3, 2)), sparse_rows=True).sparse_rows
    with pytest.raises(ValueError, match="parameter s: a scalar has no rows"):
        Parameter("s", np.float64(1.0), sparse_rows=True)
    assert "sparse_rows" in repr(Parameter("w", np.zeros(3), sparse_rows=True))


def test_table_and_selective_fc_mark_their_weights_and_a_shared_weight_keeps_the_mark():
    table = TableProjection(10, 4, sparse=True)
    Mixed([table])
    assert table.weight.sparse_rows
    tied = TableProjection(10, 4, weight=table.weight)  # sparse=False does not unmark it
    Mixed([tied])
    assert tied.weight is table.weight and tied.weight.sparse_rows
    sel = SelectiveFullyConnected([3, 2], 5, sparse=True)
    assert all(p.sparse_rows for p in sel.parameters())  # the bias too: its rows are columns
    assert not SelectiveFullyConnected(3, 5).weight.sparse_rows
    dense = Mixed([TableProjection(10, 4)])
    assert not dense.parameters()[0].sparse_rows


# -- rows_needed -------------------------------------------------------------------------------
def test_a_table_reads_its_distinct_ids_without_padding_and_shared_tables_unite():
    net = Network()
    table = TableProjection(50, 4, sparse=True)
    net.add("a", Mixed([table]), "words")
    net.add("b", Mixed([TableProjection(50, 4, weight=table.weight)]), "other")
    feeds = {"words": _ids(7, -1, 3, 7), "other": _ids(-1, 40)}
    assert _rows(net, feeds) == {"a.proj0.weight": [3, 7, 40]}
    assert net.outputs == {}  # no forward ran
    # integer values count as ids too
    assert _rows(net, {"words": np.array([2]), "other": np.array([-1])}) == {"a.proj0.weight": [2]}


def test_a_dense_reader_of_a_sparse_table_reads_every_row():
    net = Network()
    table = TableProjection(6, 4, sparse=True)
    net.add("embed", Mixed([table]), "words")
    net.add("logits", Mixed([FullMatrixProjection(4, 6, weight=table.weight)]), "embed")
    assert _rows(net, {"words": _ids(1)}) == {"embed.proj0.weight": [0, 1, 2, 3, 4, 5]}


def test_a_selective_fc_reads_the_selected_columns_or_every_row_without_a_selection():
    net = Network()
    net.add("sel", SelectiveFullyConnected([3, 2], 8, sparse=True), ["x", "y", "cols"])
    feeds = {
        "x": np.zeros((2, 3)),
        "y": np.zeros((2, 2)),
        "cols": Arg(ids=np.array([5, 1, 5, 6]), seq_starts=np.array([0, 2, 4])),  # CSR
    }
    assert _rows(net, feeds) == dict.fromkeys(["sel.weight0", "sel.weight1", "sel.bias"], [1, 5, 6])
    feeds["cols"] = Arg(ids=np.array([[2, 2], [0, 7]]))  # (N, k) table
    assert _rows(net, feeds)["sel.weight0"] == [0, 2, 7]
    full = Network()
    full.add("sel", SelectiveFullyConnected(3, 4, sparse=True), "x")
    assert _rows(full, {"x": np.zeros((2, 3))}) == dict.fromkeys(
        ["sel.weight", "sel.bias"], [0, 1, 2, 3]
    )
    feeds["cols"] = Arg(ids=np.array([[9, 0], [0, 0]]))
    with pytest.raises(NetworkError, match=r"selected columns must lie in \[0, 8\)"):
        net.rows_needed(feeds)


def test_ids_computed_by_another_layer_are_refused_with_the_layer_named():
    net = Network()
    net.add("first", Mixed([TableProjection(9, 1)]), "words")
    net.add("second", Mixed([TableProjection(9, 2, sparse=True)]), "first")
    with pytest.raises(NetworkError, match=r"Mixed 'second'.*ids come from another layer.*first"):
        net.rows_needed({"words": _ids(1)})
    sel = Network()
    sel.add("cols", Mixed([TableProjection(9, 2)]), "words")
    sel.add("out", SelectiveFullyConnected(2, 5, sparse=True), ["x", "cols"])
    with pytest.raises(NetworkError, match="its selection .* comes from another layer"):
        sel.rows_needed({"words": _ids(1), "x": np.zeros((1, 2))})


def test_missing_feeds_bad_ids_and_frozen_or_dense_tables():
    net = Network()
    net.add("t", Mixed([TableProjection(5, 2, sparse=True)]), "words")
    with pytest.raises(NetworkError, match="input 'words' was not fed"):
        net.rows_needed({})
    with pytest.raises(NetworkError, match=r"ids must lie in \[0, 5\)"):
        net.rows_needed({"words": _ids(5)})
    net["t"].parameters()[0].set_static()
    assert net.rows_needed({"words": _ids(1)}) == {}  # a frozen table stays where it is
    dense = Network()
    dense.add("t", Mixed([TableProjection(5, 2)]), "words")
    assert dense.rows_needed({}) == {}  # nothing sparse: nothing asked, not even the feeds


# -- the flag changes no numbers where parameters are held whole --------------------------------
def _regression(sparse: bool) -> Network:
    set_seed(3)
    net = Network()
    net.add("mix", Mixed([TableProjection(30, 4, sparse=sparse)], bias=True, act="tanh"), "item")
    net.add("out", FullyConnected(4, 1), "mix")
    net.add("loss", MSELoss(), ["out", "target"])
    return net


def test_local_training_of_a_sparse_table_equals_the_dense_one():
    rng = np.random.default_rng(0)
    data = {"item": rng.integers(-1, 30, 64), "target": rng.standard_normal((64, 1))}
    results = []
    for sparse in (True, False):
        trainer = Trainer(
            _regression(sparse),
            LocalSync(create_optimizer("momentum", lr=0.1)),
            8,
            dtype=np.float64,
            progress=False,
        )
        trainer.fit(data, data, epochs=2)
        results.append([p.value for p in trainer.params])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_only_a_strategy_that_fetches_rows_makes_the_trainer_ask_for_them(monkeypatch):
    # working out a batch's rows costs a unique() per forward: strategies holding tables whole
    # (fetches_rows False) never pay it
    asked = []
    real = Network.rows_needed
    spy = lambda net, feeds: asked.append(1) or real(net, feeds)  # noqa: E731
    monkeypatch.setattr(Network, "rows_needed", spy)
    data = {"item": np.arange(8) % 30, "target": np.zeros((8, 1))}
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    assert not sync.fetches_rows
    Trainer(_regression(True), sync, 4, dtype=np.float64, progress=False).fit(data, data, epochs=1)
    assert asked == []

    class Fetching(LocalSync):
        fetches_rows = True

    Trainer(_regression(True), Fetching(create_optimizer("sgd")), 4, progress=False).fit(
        data, data, epochs=1
    )
    assert len(asked) >= 2  # every training and evaluation forward
