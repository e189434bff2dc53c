"""The sparse-table example of docs/architecture.md ("What else a layer of your own needs")
runs as written: a layer made of it passes both gradient checks (which hold its notes and
``rows_read`` to the rows it writes) and trains the rows it reads under LocalSync with
``DISTCONV_CHECK_SPARSE_ROWS=1``."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np

from distconv import Arg, Trainer
from distconv.gradient_check import check_layer_grad, check_network_grad
from distconv.layers.written_rows import CHECK_ROWS_VARIABLE, note_rows
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from tests.layers.bag_layer import Bag, bag_feeds, bag_net

DOCS = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()


def _example() -> dict:
    """The methods of the docs' example, as written."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS, re.S)
    (code,) = [textwrap.dedent(b) for b in blocks if "note_rows(t, self.ids)" in b]
    methods: dict = {}
    exec(code, {"np": np, "note_rows": note_rows}, methods)  # noqa: S102  (the docs' own code)
    return methods


class DocsBag(Bag):
    """A bag of ids (one bag a row) whose ``rows_read`` and ``_backward`` are the docs'."""

    rows_read = _example()["rows_read"]
    _backward = _example()["_backward"]

    def _forward(self, x: Arg) -> np.ndarray:  # one id a row: the docs' dz is (N, width)
        self.ids = x.ids[:, 0]
        return self.table.value[self.ids]


def test_the_docs_example_passes_both_gradient_checks():
    ids = np.array([[1], [7], [1], [3]])
    check_layer_grad(DocsBag(10, 2), [Arg(ids=ids)])
    net = bag_net(layer=DocsBag)
    check_network_grad(net, bag_feeds(ids), loss="loss")


def test_the_docs_example_trains_the_rows_it_reads_under_the_check(tmp_path, monkeypatch):
    monkeypatch.setenv(CHECK_ROWS_VARIABLE, "1")
    net = bag_net(layer=DocsBag)
    table = net.parameters()[0]
    before = table.value.copy()
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    data = {"ids": np.array([[1], [7], [3], [7]]), "target": np.ones((4, 1))}
    try:
        Trainer(net, sync, 2, out_dir=tmp_path, progress=False).fit(data, epochs=1)
    finally:
        sync.close()
    moved = np.flatnonzero((table.value != before).any(axis=1)).tolist()
    assert moved == [1, 3, 7]
