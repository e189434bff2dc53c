"""Which feeds a network's layers read as ids, and the ids each may hold: what a fit checks
every row of before its first step (:func:`~distconv.data_checks.refuse_ids_out_of_range`).

A layer says which of its inputs are ids, and their range, by
:meth:`~distconv.layers.base.Layer.id_range`; a layer built of projections (a
:class:`~distconv.layers.mixed.Mixed`) answers for each input with its projection's
:meth:`~distconv.layers.part.Projection.id_range` (a
:class:`~distconv.layers.projection.TableProjection`'s rows).
"""

from __future__ import annotations

from dataclasses import dataclass

from distconv.layers.base import Layer
from distconv.layers.mixed import ProjectionLayer
from distconv.network import Network


@dataclass(frozen=True)
class IdRead:
    """A feed that a layer reads as ids, straight from the data set.

    Attributes:
        feed: the feed's name.
        reader: what reads it, as error messages name it (``"TableProjection 'proj0' of Mixed
            'emb'"``).
        low: the lowest id it takes.
        high: one past the highest id it takes.
    """

    feed: str
    reader: str
    low: int
    high: int


def id_reads(network: Network) -> list[IdRead]:
    """Every feed of ``network`` that a layer reads as ids, once per reader and input, in the
    network's order (every rank alike). A feed reaching such an input through another layer
    is the layer's to check at its forward: its ids are computed."""
    fed = set(network.feed_names)
    reads = []
    for name in network.order():
        layer, wiring = network[name], network.wiring[name]
        for index, feed in enumerate(wiring):
            if feed in fed and (found := input_id_range(layer, index, len(wiring))) is not None:
                (low, high), reader = found
                reads.append(IdRead(feed, reader, low, high))
    return reads


def input_id_range(layer: Layer, index: int, count: int) -> tuple[tuple[int, int], str] | None:
    """The range of ids input ``index`` of ``layer`` (wired to ``count`` inputs) takes
    (:meth:`~distconv.layers.base.Layer.id_range`), and what reads it, as a refusal names it:
    the layer, or the projection of a layer built of them that reads that input; None where
    it reads no ids."""
    span = layer.id_range(index, count)
    if span is None:
        return None
    part = None  # a layer built of projections answers for the input's projection
    if isinstance(layer, ProjectionLayer) and index < len(layer.projections):
        part = layer.projections[index]
    return span, layer.label if part is None else f"{part.label} of {layer.label}"
