"""Wiring mistakes a :class:`~distconv.network.Network` refuses when a layer is added, which
no single layer can see: each check names the layers and the fix, or returns None.

:class:`AddChecks` keeps what the checks read (who reads each output, the parameters by name)
as layers are added, so that an add costs about the same in a network of thousands of layers
as in one of ten: rebuilt at every add, they made building a network grow with the square of
its size (4000 layers took 24 s)."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, Sequence
from typing import Any

from distconv.kernels.activation import Linear, Softmax
from distconv.layers.activation import Activation
from distconv.layers.base import Layer
from distconv.layers.concat import Concatenate
from distconv.layers.dropout import Dropout
from distconv.layers.loss import SoftmaxCrossEntropy
from distconv.layers.mixed import ProjectionLayer
from distconv.layers.projection import SliceProjection
from distconv.layers.reshape import Reshape
from distconv.layers.sequence_pool import SequencePool
from distconv.parameter import Parameter

#: what to do about a softmax activation under a softmax cross-entropy
DROP_THE_SOFTMAX = (
    "drop the activation: SoftmaxCrossEntropy applies its own softmax; Paddle's "
    "classification_cost takes probabilities, this loss takes logits (a run checkpointed "
    "with it goes on as a new run from its weights: --init-from)"
)

#: layers that hand their inputs' values on as they are (reshaped, placed side by side,
#: dropped out and rescaled) or pooled over a sequence's rows: with no activation of their own,
#: probabilities stay probabilities. A pool's average, max, first or last row is one still, in
#: [0, 1]; its sum is a count of them, in [0, rows]: read as logits, neither can say more than
#: a softmax already squashed, as Paddle's per-token softmax pooled into classification_cost
#: (which takes probabilities) ported here reads them
_PASSING_ON = (Activation, Concatenate, Dropout, Reshape, SequencePool)


def double_softmax(
    name: str,
    layer: Layer,
    inputs: Sequence[str],
    layers: Mapping[str, Layer],
    wiring: Mapping[str, Sequence[str]],
    readers: Mapping[str, Sequence[str]],
) -> str | None:
    """Why adding ``layer`` as ``name``, reading ``inputs``, to a network of ``layers`` wired
    as ``wiring`` (``readers``: the layers that read each name) makes a softmax cross-entropy
    read probabilities, or None.

    Paddle's idiom ``fc(act=softmax)`` + ``classification_cost`` trains, here, on
    ``softmax(softmax(z))``: the loss cannot fall below about 0.55 for 3 classes and the
    gradients are squashed, while the accuracy looks fine, so nothing told the user. The
    softmax may reach the loss through layers that pass values on (a dropout, a reshape, a
    concatenation, an identity projection, a sequence pool), and the layers may be added in
    any order (a network may be built from its loss down): only a chain this add completes is
    refused. Only the losses above ``name`` are walked down from, in the order they were added.
    """
    added = layers  # in the order they were added: read only where several losses are above
    layers = ChainMap({name: layer}, layers)  # a view: a copy per add grew with the network
    wiring = ChainMap({name: tuple(inputs)}, wiring)
    losses = _losses_above(name, layers, wiring, readers)
    if len(losses) > 1:
        position = {n: i for i, n in enumerate(added)}
        losses = sorted(set(losses), key=lambda n: position.get(n, len(position)))  # name last
    for loss_name in losses:
        chain = _softmax_under(wiring[loss_name][0], layers, wiring)
        if chain and name in (loss_name, *chain):
            return _refusal(layers[loss_name], [layers[n] for n in chain])
    return None


def _losses_above(
    name: str,
    layers: Mapping[str, Layer],
    wiring: Mapping[str, Sequence[str]],
    readers: Mapping[str, Sequence[str]],
) -> list[str]:
    """The softmax cross-entropies taking logits whose first input is ``name`` or reads it
    through layers that pass values on (``name`` itself when it is one): the only losses a
    chain through ``name`` can reach."""
    found = [name] if _takes_logits(layers[name], wiring[name]) else []
    seen, below = {name}, [name]
    while below:
        lower = below.pop()
        for reader in readers.get(lower, ()):
            upper = layers[reader]
            if wiring[reader][0] == lower and _takes_logits(upper, wiring[reader]):
                found.append(reader)
            if reader not in seen and _passes_on(upper):
                seen.add(reader)
                below.append(reader)
    return found


def _takes_logits(layer: Layer, inputs: Sequence[str]) -> bool:
    """Whether ``layer``, reading ``inputs``, is a softmax cross-entropy that takes logits."""
    return isinstance(layer, SoftmaxCrossEntropy) and layer.takes_logits and bool(inputs)


def _softmax_under(
    top: str, layers: Mapping[str, Layer], wiring: Mapping[str, Sequence[str]]
) -> list[str] | None:
    """The layers from one whose act is a softmax up to ``top`` (the softmax first), where
    every layer above it passes values on; None where there is no such layer."""
    paths, seen = [[top]], {top}
    while paths:
        path = paths.pop()
        layer = layers.get(path[0])
        if layer is None:  # a feed
            continue
        if isinstance(layer.act, Softmax):
            return path
        if _passes_on(layer):
            for below in wiring[path[0]]:
                if below not in seen:
                    seen.add(below)
                    paths.append([below, *path])
    return None


def _passes_on(layer: Layer) -> bool:
    """Whether ``layer`` hands its inputs' values on unchanged in meaning (see _PASSING_ON; a
    Mixed or Concatenate2 of identity and slice projections alone, a bias aside)."""
    if not isinstance(layer.act, Linear):
        return False
    if isinstance(layer, ProjectionLayer):
        parts = [p for p in layer.projections if p is not None]
        return not layer.operators and all(isinstance(p, SliceProjection) for p in parts)
    return isinstance(layer, _PASSING_ON)


def _refusal(loss: Layer, chain: list[Layer]) -> str:
    """The refusal of ``loss`` reading probabilities: ``chain[0]``'s softmax, passed on by the
    rest of ``chain``."""
    logits, *between = chain
    through = f", through {', '.join(x.label for x in between)}" if between else ""
    return (
        f"{loss.label} reads the output of {logits.label}, whose act is {logits.act.name!r}"
        f"{through}: a softmax of a softmax, which trains badly without an error; "
        f"{DROP_THE_SOFTMAX}"
    )


def parameter_name_clash(
    name: str, layer: Layer, by_name: Mapping[str, Sequence[Parameter]]
) -> str | None:
    """Why adding ``layer`` as ``name`` to a network whose parameters were named as in
    ``by_name`` when added gives one of its parameters (``name.<key>``) another parameter's
    name, or None: "fc" + "proj0.weight" is "fc.proj0" + "weight". Not the names of weights
    shared from layers not added yet: their owners' adds rename them (two such were refused),
    so a parameter filed under a name it no longer bears is no clash."""
    own: dict[str, Parameter] = {}
    for p in layer.parameters():
        if not p.name.startswith(f"{name}."):
            continue
        others = (q for q in by_name.get(p.name, ()) if q is not p and q.name == p.name)
        if next(others, None) is not None or own.setdefault(p.name, p) is not p:
            return (
                f"its parameter {p.name!r} is named as a different parameter already in the "
                "network; rename the layer"
            )
    return None


class AddChecks:
    """The checks a :class:`~distconv.network.Network` runs at each add, with what they read
    kept up to date as layers are added rather than rebuilt from every layer each time.

    Args:
        layers: the network's layers by name; read, never written.
        wiring: each layer's inputs by name; read, never written.

    The network hands over its dicts again before each add (:meth:`follow`): a script may
    rebind either. Never the network itself: that made a reference cycle, and a model dropped
    was freed only at the cycle collector's next full run, its weights (on a GPU, its device
    memory) held till then.
    """

    def __init__(self, layers: Mapping[str, Layer], wiring: Mapping[str, Sequence[str]]) -> None:
        self._layers, self._wiring = layers, wiring
        self._readers: dict[str, list[str]] = {}  # a name -> the layers that read it
        self._params: dict[str, list[Parameter]] = {}  # a name -> the parameters added so named
        self._names: dict[int, str] = {}  # id of a layer in the network -> its name
        self._count = 0  # the layers recorded: more than the network holds, one was deleted

    def __getstate__(self) -> dict[str, Any]:
        """A copy's or pickle's state (``copy.deepcopy(net)``): the layers' ids it holds
        (:attr:`_names`) are the originals', which let the copy's own layers be added again
        under other names; it records its own afresh at its next add."""
        return {**self.__dict__, "_count": -1}

    def follow(self, layers: Mapping[str, Layer], wiring: Mapping[str, Sequence[str]]) -> None:
        """Read ``layers`` and ``wiring``, the network's dicts now, from here on: where either
        was rebound (``net.layers = {...}``, to filter a head out), every layer is recorded
        afresh from them."""
        if layers is not self._layers or wiring is not self._wiring:
            self._layers, self._wiring = layers, wiring
            self._record()

    def name_of(self, layer: Layer) -> str | None:
        """The name ``layer`` (this very object) is in the network under, or None."""
        self._refresh()
        name = self._names.get(id(layer))
        return name if name is not None and self._layers.get(name) is layer else None

    def problem(self, name: str, layer: Layer, inputs: Sequence[str]) -> str | None:
        """Why ``layer`` may not be added as ``name`` reading ``inputs`` (its parameters
        already named for it), or None."""
        self._refresh()
        return parameter_name_clash(name, layer, self._params) or double_softmax(
            name, layer, inputs, self._layers, self._wiring, self._readers
        )

    def added(self, name: str, layer: Layer, inputs: Sequence[str]) -> None:
        """Record ``layer``, just added as ``name`` reading ``inputs``."""
        self._count += 1
        self._names[id(layer)] = name  # the network holds the layer: its id stays its own
        for source in dict.fromkeys(inputs):
            self._readers.setdefault(source, []).append(name)
        for p in layer.parameters():
            named = self._params.setdefault(p.name, [])
            if all(q is not p for q in named):
                named.append(p)

    def _refresh(self) -> None:
        """Record the network's layers afresh where one was deleted since the last add (``del
        net.layers[name]``, to replace a head): a deleted loss, still filed as a reader, made
        the next add raise KeyError, and a deleted layer's parameter names refused its
        replacement's as "named as a different parameter already in the network"."""
        if self._count != len(self._layers):
            self._record()

    def _record(self) -> None:
        """Record every layer of the network afresh."""
        self._readers, self._params, self._names, self._count = {}, {}, {}, 0
        for name, layer in self._layers.items():
            self.added(name, layer, self._wiring.get(name, ()))
