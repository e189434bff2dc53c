"""What a pass of a :class:`~distconv.network.Network` reads, known before it runs: the rows of
the sparse tables a batch reads (a parameter server fetches only those), and the layers and
feeds some outputs need (a prediction runs those alone, and needs no labels), and why no
backward follows a pass that ran only those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from distconv.arg import Arg
from distconv.backend import get_array_module
from distconv.layers.base import LayerError

if TYPE_CHECKING:  # network.py imports this module
    from distconv.network import Network


def rows_needed(network: Network, feeds: Mapping[str, Arg | Any]) -> dict[str, Any]:
    """:meth:`Network.rows_needed <distconv.network.Network.rows_needed>`: the rows a forward
    on ``feeds`` reads of each trainable ``sparse_rows`` parameter, by its name."""
    from distconv.network import NetworkError

    sparse = {p.name for p in network.parameters() if p.sparse_rows and not p.static}
    found: dict[str, list[Any]] = {}
    fed = set(network.feed_names)
    for name in network.order() if sparse else ():
        layer = network.layers[name]
        if not sparse.intersection(p.name for p in layer.parameters()):
            continue
        wiring = network.wiring[name]
        args = [network._feed_arg(i, feeds) if i in fed else None for i in wiring]
        try:
            reads = layer.rows_read(args)
        except LayerError as exc:
            computed = [i for i in wiring if i not in fed]
            where = f" (inputs computed by layers: {computed})" if computed else ""
            raise NetworkError(f"{exc}{where}") from exc  # the layer's, its cause kept
        for pname, ids in reads:
            if pname in sparse:
                found.setdefault(pname, []).append(ids.reshape(-1))
    return {n: get_array_module(*v).unique(_concat(v)) for n, v in found.items()}


def _concat(arrays: list[Any]) -> Any:
    return arrays[0] if len(arrays) == 1 else get_array_module(*arrays).concatenate(arrays)


def layers_needed(network: Network, outputs: Iterable[str]) -> list[str]:
    """The layers a forward must run to compute ``outputs`` (layer or feed names): theirs and
    those they read, in the network's topological order.

    Raises:
        NetworkError: a name is neither a layer nor a feed of the network.
    """
    from distconv.network import NetworkError

    wanted = list(outputs)
    known = set(network.layers) | set(network.feed_names)
    if unknown := [n for n in wanted if n not in known]:
        raise NetworkError(
            f"no layer or feed {unknown[0]!r} to compute; layers: {list(network.layers)}"
        )
    needed, todo = set(), [n for n in wanted if n in network.layers]
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(i for i in network.wiring[name] if i in network.layers)
    return [name for name in network.order() if name in needed]


def unread_layers(network: Network) -> list[str]:
    """The layers no other layer reads, in topological order: a training network's loss, or
    the several a loss must be chosen among."""
    read = {i for inputs in network.wiring.values() for i in inputs}
    return [name for name in network.order() if name not in read]


def feeds_read(network: Network, layers: Iterable[str], outputs: Iterable[str] = ()) -> list[str]:
    """The feeds of ``network`` that ``layers`` read, with those named in ``outputs``, sorted."""
    read = {i for name in layers for i in network.wiring[name]} | set(outputs)
    return [name for name in network.feed_names if name in read]


def not_run_problem(late: list[str], partial: bool) -> str:
    """Why a backward is refused where the layers ``late`` did not run in the last forward:
    added since, or, after a forward with ``outputs`` (``partial``), not needed by them; their
    inputs kept for a backward would be an earlier pass's."""
    if partial:
        return (
            f"backward after a forward that ran only the layers its outputs=... need: layer(s) "
            f"{late} did not run, so they hold no inputs of this pass; run forward without "
            "outputs first"
        )
    return f"layer(s) {late} were added after the last forward; run forward again first"
