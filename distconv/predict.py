"""Predictions of a trained network on inputs without labels: its scores (logits), or class ids.

A network that trains ends in a loss, which reads labels; a prediction runs only the layers
its output needs (:meth:`~distconv.network.Network.forward` with ``outputs``), so it is fed
only the inputs those read, in batches, inside :func:`~distconv.layers.modes.forward_only`
(no layer keeps work for a backward) and with Dropout and its kind in prediction mode (they are
outside a training step). Float inputs are cast to the parameters' float dtype, as the Trainer
casts each batch. Nothing is written to the network's parameters.

Example:
    >>> net = lenet((1, 8, 8), 10)
    >>> load_weights("runs/digits", net.parameters())   # distconv.init_from
    >>> predict_classes(net, images)                    # images: (N, 1, 8, 8)
    array([3, 8, ...])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from distconv.arg import feeds_of
from distconv.backend import is_float_dtype, to_host
from distconv.data import array_length
from distconv.layers.modes import forward_only
from distconv.network import Network, NetworkError
from distconv.network_reads import feeds_read, layers_needed, unread_layers
from distconv.sampler import check_count


def predict(
    network: Network,
    inputs: Any,
    *,
    output: str | None = None,
    batch_size: int = 256,
) -> np.ndarray:
    """The values of ``output`` for every row of ``inputs``, on the host, in their order.

    Args:
        network: the model, its weights loaded (:func:`distconv.init_from.load_weights`).
        inputs: an array of examples (batch axis first) where ``output`` reads one input, or
            arrays by input name; labels are not needed.
        output: the layer whose values to return; None: the scores the softmax cross-entropy
            loss reads (for :func:`~distconv.models.lenet`, ``fc2``: logits, not
            probabilities).
        batch_size: rows forwarded at a time; the values do not depend on it beyond the
            float rounding of the kernels.

    Raises:
        NetworkError: no ``output`` given and the network has no softmax cross-entropy loss to
            find it by, ``output`` names no layer, an input it needs is missing or has no
            batch axis, or an array is given for several inputs.
        ValueError: ``batch_size`` is not an int >= 1.
    """
    check_count("batch_size", batch_size, 1)
    output = output or scores_layer(network)
    arrays = _named_inputs(network, inputs, output)
    n = array_length(arrays)
    dtype = _float_dtype(network)
    pieces = []
    with forward_only():  # no backward follows: layers keep nothing for one
        for start in range(0, max(n, 1), batch_size):  # no rows: one empty batch, its shape
            feeds = feeds_of(arrays, np.arange(start, min(start + batch_size, n)), dtype)
            pieces.append(to_host(network.forward(feeds, outputs=[output])[output].value))
    return np.concatenate(pieces)


def predict_classes(
    network: Network, inputs: Any, *, output: str | None = None, batch_size: int = 256
) -> np.ndarray:
    """The class id of each row of ``inputs``: the argmax over axis 1 of :func:`predict`'s
    scores, as the Trainer counts right answers
    (:func:`~distconv.evaluation_sums.right_answers`)."""
    return predict(network, inputs, output=output, batch_size=batch_size).argmax(axis=1)


def scores_layer(network: Network) -> str:
    """The layer whose output a softmax cross-entropy loss of ``network`` reads as its scores.

    Raises:
        NetworkError: no such loss, or several, each named.
    """
    last = unread_layers(network)
    pairs = {name: network.softmax_inputs(name) for name in last}
    found = [pair[0] for pair in pairs.values() if pair is not None]
    if len(found) != 1:
        raise NetworkError(
            f"no one softmax cross-entropy loss among the layers read by none ({last}) to "
            "predict by; name the layer whose values to return (output=...)"
        )
    return found[0]


def _named_inputs(network: Network, inputs: Any, output: str) -> Mapping[str, Any]:
    """``inputs`` by input name: a lone array given the one input ``output`` reads; a nested
    list made an array (indexed by rows, it failed in numpy's words)."""
    if isinstance(inputs, Mapping):
        return {name: _array(name, values) for name, values in inputs.items()}
    needed = feeds_read(network, layers_needed(network, [output]), [output])
    if len(needed) != 1:
        raise NetworkError(
            f"{output!r} reads the inputs {needed}: pass a dict of arrays by input name"
        )
    return {needed[0]: _array(needed[0], inputs)}


def _array(name: str, values: Any) -> Any:
    """``values`` as they are where they have a shape (a numpy or cupy array), else an array.

    Raises:
        NetworkError: ``values`` have no batch axis (None, a number), named by input ``name``.
    """
    array = values if hasattr(values, "shape") else np.asarray(values)
    if not array.shape:  # len() of it failed in numpy's words, naming no input
        raise NetworkError(
            f"input {name!r} is {values!r} ({type(values).__name__}), not examples: pass an "
            "array of them, the batch axis first"
        )
    return array


def _float_dtype(network: Network) -> Any:
    """The float dtype inputs are cast to: the float parameters' one, None where they mix
    several (each layer then casts as in a script's own forward) or have none."""
    kinds = {p.value.dtype for p in network.parameters() if is_float_dtype(p.value.dtype)}
    return kinds.pop() if len(kinds) == 1 else None
