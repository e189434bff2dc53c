"""One backward pass's firings: the callback each parameter calls through ``inc_update``, as
:meth:`~distconv.network.Network.backward` hands it to the layers, and the check after the
pass that each trainable parameter fired once, in the first pass's order.

The network's own error class is passed in (``error``): this module does not import the
network, which imports it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from distconv.layers.base import Layer
from distconv.parameter import Parameter, UpdateCallback


class Firing:
    """The record of one backward pass: which parameters fired, in order, and the layer whose
    backward runs (:meth:`run`).

    Args:
        callback: the pass's callback (a sync strategy's, the Trainer's ``keep_gradient``).
        error: the exception class a refusal raises, with its message (the network's).

    Attributes:
        fired: the parameters fired so far, in order.
        layer: the name of the layer whose backward runs now ("" before the first).
    """

    def __init__(self, callback: UpdateCallback, error: Callable[[str], Exception]) -> None:
        self.callback, self.error = callback, error
        self.fired: list[Parameter] = []
        self.layer = ""

    def fire(self, p: Parameter) -> None:
        """What the layers are given as the callback: ``p`` recorded, then the pass's own."""
        self.fired.append(p)
        self.callback(p)

    def run(self, name: str, layer: Layer) -> None:
        """The backward of ``layer`` (named ``name`` in the network), with :meth:`fire`."""
        self.layer = name
        layer.backward(self.fire)


def fired_problem(
    fired: Sequence[Parameter], trainable: Sequence[Parameter], order: Sequence[str] | None
) -> str | None:
    """Why the pass that fired ``fired`` is refused, or None: each of ``trainable`` fires
    exactly once, and in ``order`` (the first pass's names; None: this pass is the first)."""
    if len(fired) != len(trainable) or {id(p) for p in fired} != {id(p) for p in trainable}:
        times = Counter(id(p) for p in fired)
        wrong = [f"{p.name} ({times[id(p)]} times)" for p in trainable if times[id(p)] != 1]
        return (
            f"after backward every trainable parameter must fire its callback once; "
            f"{', '.join(wrong) or 'parameters outside this network fired'}. A layer's "
            f"backward calls param.inc_update(callback) once per pass for each parameter"
        )
    names = [p.name for p in fired]
    if order is None or names == list(order):
        return None
    pairs = zip(names + [None], list(order) + [None])
    i, (now, then) = next((i, ab) for i, ab in enumerate(pairs) if ab[0] != ab[1])
    return (
        f"parameters fired in another order than in the first pass: position {i} is "
        f"{now!r}, was {then!r}; call reset_firing_order() after changing which "
        f"parameters train"
    )
