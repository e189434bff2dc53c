"""Wiring mistakes a :class:`~distconv.network.Network` refuses when a layer is added, which
no single layer can see: each check names the layers and the fix, or returns None."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from distconv.kernels.activation import Softmax
from distconv.layers.base import Layer
from distconv.layers.loss import SoftmaxCrossEntropy

#: what to do about a softmax activation under a softmax cross-entropy
DROP_THE_SOFTMAX = (
    "drop the activation: SoftmaxCrossEntropy applies its own softmax; Paddle's "
    "classification_cost takes probabilities, this loss takes logits"
)


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
    gradients are squashed, while the accuracy looks fine, so nothing told the user. Either
    end may be added first (a network may be built from its loss down).
    """
    if isinstance(layer, SoftmaxCrossEntropy) and inputs and inputs[0] in layers:
        return _refusal(layer, layers[inputs[0]])
    if isinstance(layer.act, Softmax):
        for loss, read in wiring.items():
            if isinstance(layers[loss], SoftmaxCrossEntropy) and read and read[0] == name:
                return _refusal(layers[loss], layer)
    return None


def _refusal(loss: Layer, logits: Layer) -> str | None:
    """The refusal of ``loss`` reading ``logits``'s output, where that is a softmax's."""
    if not isinstance(logits.act, Softmax):
        return None
    return (
        f"{loss.label} reads the output of {logits.label}, whose act is {logits.act.name!r}: "
        f"a softmax of a softmax, which trains badly without an error; {DROP_THE_SOFTMAX}"
    )
