"""A :class:`~distconv.network.Network` as a notebook shows it: its size, its feeds, and its layers
in the order added, each with its kind, what it reads, its outputs (a layer's output features or
channels, where it has a number of them) and its parameter count. ``repr`` of a Network is this;
it was ``<distconv.network.Network object at 0x...>``, which says nothing of the model.

A summary stays a few lines for a model of thousands of layers: the first :data:`MOST_LAYERS`
are shown and the rest counted (:func:`~distconv.short_lists.short_list`), and so are the feeds;
a name is cut to :data:`MOST_CHARS`. ``repr`` never raises: a notebook, a debugger and a
traceback's locals call it on a model of any state, one a script wired by hand included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from distconv.layers.base import Layer
from distconv.messages import exception_line, one_line
from distconv.short_lists import short_list

if TYPE_CHECKING:  # the Network's own module imports this one for its repr
    from distconv.network import Network

#: the layers a summary shows, one a line; the rest are counted on the line after them
MOST_LAYERS = 20

#: the feeds and inputs a summary names on a line; the rest are counted
MOST_NAMES = 4

#: the characters of a name a summary shows, on one line; a longer one is cut
MOST_CHARS = 60


def network_summary(network: Network) -> str:
    """``network`` in a few lines, as ``repr`` shows it::

        Network(7 layers, 360 parameters; feeds image, label)
          conv1  Conv2D               <- image       4 out   40 parameters
          pool1  MaxPool2D            <- conv1
          ...
          loss   SoftmaxCrossEntropy  <- fc2, label

    A parameter that layers share is counted once in the total, and beside each layer that
    holds it; a frozen one (``static``) too. It reads the network as it is, never raising for
    a model that :meth:`~distconv.network.Network.parameters` refuses (two parameters of one
    name): a notebook shows the summary of the model it is told is wrong. A layer put into
    ``layers`` without ``add`` reads nothing (``<- nothing``); a model no summary can be made of
    (a half-built one, a layer whose ``parameters()`` raises) is shown by its type and why.
    """
    try:
        return _summary(network)
    except Exception as exc:  # a repr that raises hides the model and the error both
        why = one_line(f"{type(exc).__name__}: {exception_line(exc)}", 4 * MOST_CHARS)
        return f"<{type(network).__name__} at {id(network):#x}: no summary ({why})>"


def _summary(network: Network) -> str:
    """:func:`network_summary`, which may raise on a model in no state to be summed up."""
    layers = list(network.layers.items())  # the order added: a cycle has no other
    held = {id(p): p.size for _, layer in layers for p in layer.parameters()}
    header = (
        f"Network({counted(len(layers), 'layer')}, {counted(sum(held.values()), 'parameter')}"
        f"; feeds {names_told(network.feed_names) or 'none'})"
    )
    wiring = network.wiring
    rows = [layer_row(name, layer, wiring.get(name, ())) for name, layer in layers[:MOST_LAYERS]]
    shown = [f"  {line}" for line in aligned(rows)]
    if len(layers) > MOST_LAYERS:
        shown.append(f"  ({short_list([], 1, more=len(layers) - MOST_LAYERS, noun='layer')})")
    return "\n".join([header, *shown])


def names_told(names: Sequence[str]) -> str:
    """The first :data:`MOST_NAMES` of ``names``, each on one line and cut to
    :data:`MOST_CHARS`, and how many more: ``a, b, c, d and 9996 more``; ``""`` for none."""
    told = [one_line(str(name), MOST_CHARS) for name in names[:MOST_NAMES]]
    return short_list(told, MOST_NAMES, more=len(names) - len(told))


def counted(count: int, noun: str) -> str:
    """``1 layer``, ``1,492 parameters``: a count, with thousands marked, and its noun."""
    return f"{count:,} {noun}{'s' * (count != 1)}"


def layer_row(name: str, layer: Layer, inputs: tuple[str, ...]) -> list[str]:
    """The columns of ``layer``'s line: its name, kind, inputs, outputs and parameters (the
    last two blank where it has none)."""
    size = sum(p.size for p in layer.parameters())
    return [
        one_line(name, MOST_CHARS),
        type(layer).__name__,
        f"<- {names_told(inputs) or 'nothing'}",
        "" if (width := layer_outputs(layer)) is None else f"{width:,} out",
        counted(size, "parameter") if size else "",
    ]


def layer_outputs(layer: Layer) -> int | None:
    """How many outputs ``layer`` gives per position: a fully connected layer's features, a
    convolution's channels; None for a layer that has no such number (a pool, a loss)."""
    for attribute in ("out_features", "out_channels"):
        width = getattr(layer, attribute, None)
        if isinstance(width, int) and not isinstance(width, bool):
            return width
    return None


def aligned(rows: list[list[str]]) -> list[str]:
    """``rows`` of columns as lines, each column as wide as its widest cell (the numbers at
    the right of theirs), the trailing blanks cut."""
    widths = [max(len(cell) for cell in column) for column in zip(*rows)]
    numbers = {3, 4}  # outputs and parameters: right-aligned, as digits line up
    return [
        "  ".join(
            cell.rjust(width) if i in numbers else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    ]
