"""A small text model from Mixed layers (table + context projections) learns a sequence task.

Each token's label is the class of the token before it (a fixed class at a sequence's start), so
the model can only succeed if the context projection really brings in the previous row of the
same sequence, its trainable padding learns the start-of-sequence case, and every gradient
reaches the table through the network with plain SGD applied in the ``inc_update`` callback.
"""

import time

import numpy as np

from distconv import Arg
from distconv.init import set_seed
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.layers.mixed import Mixed
from distconv.layers.projection import ContextProjection, TableProjection
from distconv.network import Network

VOCAB, CLASSES, EMBED = 16, 4, 8
START_CLASS = 0  # the label of a sequence's first token: there is no token before it


def make_batch(rng, n_seqs=16):
    lengths = rng.integers(1, 9, n_seqs)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    words = rng.integers(0, VOCAB, starts[-1])
    previous = np.roll(words, 1) * CLASSES // VOCAB
    labels = np.where(np.isin(np.arange(len(words)), starts[:-1]), START_CLASS, previous)
    return {
        "words": Arg(ids=words, seq_starts=starts),
        "label": Arg(ids=labels.astype(np.int64)),
    }


def build_network(context_length=3, context_start=-2):
    set_seed(3)
    net = Network()
    net.add("embed", Mixed([TableProjection(VOCAB, EMBED)]), inputs="words")
    window = ContextProjection(EMBED, context_length, context_start, trainable_padding=True)
    net.add("context", Mixed([window], bias=True, act="tanh"), inputs="embed")
    net.add("logits", FullyConnected(context_length * EMBED, CLASSES), inputs="context")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["logits", "label"])
    return net


def train(net, steps=40, lr=0.5, seed=0):
    rng = np.random.default_rng(seed)

    def sgd(p):
        p.value -= lr * p.grad
        p.grad[...] = 0

    losses = []
    for _ in range(steps):
        out = net.forward(make_batch(rng))
        losses.append(float(out["loss"].value))
        net.backward(sgd)
    return losses


def test_text_model_learns_the_previous_token():
    t0 = time.perf_counter()
    net = build_network()
    names = [p.name for p in net.parameters()]
    assert names[:3] == ["embed.proj0.weight", "context.proj0.weight", "context.bias"]
    losses = train(net)
    first, last = np.mean(losses[:3]), np.mean(losses[-5:])
    assert np.isfinite(losses).all()
    assert last < 0.5 * first, f"loss went from {first:.3f} to {last:.3f}"
    # every gradient was applied and cleared by the callback: nothing is left pending
    assert all(not p.grad.any() for p in net.parameters())
    assert time.perf_counter() - t0 < 15


def test_a_window_without_the_previous_token_cannot_learn_it():
    """The control: the same model seeing rows t and t+1 only stays near chance."""
    losses = train(build_network(context_length=2, context_start=0))
    assert np.mean(losses[-5:]) > 0.75 * np.mean(losses[:3])
