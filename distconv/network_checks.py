"""Wiring mistakes a :class:`~distconv.network.Network` refuses when a layer is added, which
no single layer can see: each check names the layers and the fix, or returns None."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
) -> str | None:
    """Why adding ``layer`` as ``name``, reading ``inputs``, to a network of ``layers`` wired
    as ``wiring`` makes a softmax cross-entropy read probabilities, or None.

    Paddle's idiom ``fc(act=softmax)`` + ``classification_cost`` trains, here, on
    ``softmax(softmax(z))``: the loss cannot fall below about 0.55 for 3 classes and the
    gradients are squashed, while the accuracy looks fine, so nothing told the user. The
    softmax may reach the loss through layers that pass values on (a dropout, a reshape, a
    concatenation, an identity projection, a sequence pool), and the layers may be added in
    any order (a network may be built from its loss down): only a chain this add completes is
    refused.
    """
    layers, wiring = {**layers, name: layer}, {**wiring, name: tuple(inputs)}
    for loss_name, loss in layers.items():
        if not (isinstance(loss, SoftmaxCrossEntropy) and loss.takes_logits and wiring[loss_name]):
            continue
        chain = _softmax_under(wiring[loss_name][0], layers, wiring)
        if chain and name in (loss_name, *chain):
            return _refusal(loss, [layers[n] for n in chain])
    return None


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


def parameter_name_clash(name: str, layer: Layer, layers: Mapping[str, Layer]) -> str | None:
    """Why adding ``layer`` as ``name`` to a network of ``layers`` gives one of its parameters
    (``name.<key>``) another parameter's name, or None: "fc" + "proj0.weight" is "fc.proj0" +
    "weight". Not the names of weights shared from layers not added yet: their owners' adds
    rename them (two such were refused)."""
    by_name = {p.name: p for other in layers.values() for p in other.parameters()}
    for p in layer.parameters():
        if p.name.startswith(f"{name}.") and by_name.setdefault(p.name, p) is not p:
            return (
                f"its parameter {p.name!r} is named as a different parameter already in the "
                "network; rename the layer"
            )
    return None
