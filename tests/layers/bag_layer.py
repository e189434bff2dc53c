"""A layer of one's own that adds into rows of a sparse table by an index array, as
docs/architecture.md ("What else a layer of your own needs") tells a layer's author to write
one, with switches for the mistakes the sparse-row checks must find: noting fewer rows than it
writes, noting a mask or every row, and a ``rows_read`` that misses rows it reads."""

from __future__ import annotations

import numpy as np

from distconv import Arg, Network
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss
from distconv.layers.base import Layer
from distconv.layers.written_rows import EVERY_ROW, note_rows


class Bag(Layer):
    """``out[b] = sum_j table[ids[b, j]]``, a float64 table of ``vocab`` rows.

    Args:
        note: what its backward notes: ``"all"`` the ids it added into, ``"first"`` only the
            first column's, ``"none"`` nothing, ``"mask"`` a boolean mask of the rows written,
            ``"every"`` every row; ``"few"`` the ids when its batch reads at most two rows,
            else nothing (a layer with two code paths, one of which forgets).
        read: what its ``rows_read`` reports: ``"all"`` every id fed, ``"first"`` only the
            first column's.
    """

    def __init__(self, vocab: int, width: int, note: str = "all", read: str = "all", **kw):
        super().__init__(**kw)
        self.table = self.make_weight(
            "table", (vocab, width), init="normal", fan_in=width, fan_out=width, dtype=np.float64
        )
        self.table.mark_sparse_rows()
        self.note, self.read = note, read

    def rows_read(self, feeds):
        ids = feeds[0].ids
        return [(self.table.name, np.unique(ids if self.read == "all" else ids[:, :1]))]

    def _forward(self, x: Arg) -> np.ndarray:
        self.ids = x.ids
        return self.table.value[x.ids].sum(axis=1)

    def _backward(self, dz: np.ndarray, callback) -> None:
        t = self.table
        if not t.static:
            np.add.at(t.grad, self.ids, dz[:, None, :])
            if noted := self._noted():
                note_rows(t, noted[0])
        t.inc_update(callback)

    def _noted(self) -> tuple | None:
        """What this backward notes, as ``(rows,)``, or None for no note."""
        if self.note == "mask":
            mask = np.zeros(len(self.table.grad), dtype=bool)
            mask[self.ids] = True
            return (mask,)
        few = len(np.unique(self.ids)) <= 2
        rows = {
            "all": self.ids,
            "first": self.ids[:, 0],
            "every": EVERY_ROW,
            "few": self.ids if few else None,
        }.get(self.note)
        return None if rows is None else (rows,)


def bag_net(vocab: int = 10, width: int = 2, layer: type[Bag] = Bag, **bag) -> Network:
    """A :class:`Bag` (or ``layer``, a subclass) under a float64 FC of one output and an MSE
    loss on ``target``."""
    set_seed(0)
    net = Network()
    net.add("bag", layer(vocab, width, **bag), "ids")
    net.add("fc", FullyConnected(width, 1, dtype=np.float64), "bag")
    net.add("loss", MSELoss(), ["fc", "target"])
    return net


def bag_feeds(ids) -> dict:
    """A batch of bags of ``ids`` (one bag a row), with targets of ones."""
    ids = np.asarray(ids, dtype=np.int64)
    return {"ids": Arg(ids=ids), "target": np.ones((len(ids), 1)), "label": np.ones(len(ids))}
