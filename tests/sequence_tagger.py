"""What the ragged-sequence tests share: a per-token tagger, a per-sentence classifier (through
``SequencePool``'s average), sentences whose lengths put empty shares where the tests want them,
and the independent reference: a loop written by hand that gathers each step's sentences with a
Python loop, counts their tokens, and skips a step of none.

The tagger: token ids -> Mixed[TableProjection] -> Mixed[ContextProjection] -> FullyConnected ->
SoftmaxCrossEntropy on per-token labels, every parameter float64.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from distconv.arg import Arg
from distconv.equivalence import weights
from distconv.init import set_seed
from distconv.layers import FullyConnected, Mixed, SequencePool, SoftmaxCrossEntropy
from distconv.layers.context import ContextProjection
from distconv.layers.projection import TableProjection
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.sampler import epoch_permutation
from distconv.sequence_set import SequenceSet
from distconv.sync.base import SyncStrategy
from distconv.sync.local import LocalSync

VOCAB, WIDTH, CLASSES, CONTEXT = 20, 4, 3, 3
#: the global batch of the tests' steps: 4 sentences (2 ranks x 2, or 1 rank x 2 x 2 passes)
GLOBAL = 4
#: sentence lengths in epoch 0's order (seed 0): step 0 [3, 0, 2, 0] leaves rank 1 of 2 only
#: empty sentences, step 1 holds no token at all, step 2 [2, 3, 0, 0] leaves the second of two
#: accumulated passes empty, and step 3 is short (3 sentences: 2 + 1 on 2 ranks)
IN_ORDER = (3, 0, 2, 0, 0, 0, 0, 0, 2, 3, 0, 0, 4, 1, 5)
#: epoch 0's order where rank 0 of 2 gets only empty sentences in the first step (2 a rank): it
#: runs no backward there, while rank 1 does
RANK0_EMPTY_FIRST = (0, 3, 0, 2, 1, 0, 0, 0, 2, 3, 0, 0, 4, 1, 5)
OPTIMIZER = {"name": "adam", "lr": 0.05}


def tagger(seed: int = 0, tables: int = 1) -> Network:
    """The per-token tagger, initialised from ``seed``; its embedding the sum of ``tables``
    tables (two: a backward fires them in parameter order, not reversed, as a Mixed layer fires
    its projections)."""
    net = _windows(seed, tables)
    net.add("out", FullyConnected(WIDTH * CONTEXT, CLASSES, dtype=np.float64), "ctx")
    net.add("loss", SoftmaxCrossEntropy(), ["out", "label"])
    return net


def classifier(seed: int = 0) -> Network:
    """The tagger's layers, averaged per sentence (an empty one's is zeros), scored against one
    label per sentence."""
    net = _windows(seed)
    net.add("pool", SequencePool("average"), "ctx")
    net.add("out", FullyConnected(WIDTH * CONTEXT, CLASSES, dtype=np.float64), "pool")
    net.add("loss", SoftmaxCrossEntropy(), ["out", "label"])
    return net


def _windows(seed: int, tables: int = 1) -> Network:
    """Both models' first layers, float64, initialised from ``seed``: each token's embedding
    (``emb``, the sum of ``tables`` tables), then the window of embeddings around it
    (``ctx``)."""
    set_seed(seed)
    f64 = np.float64
    net = Network()
    embedding = Mixed([TableProjection(VOCAB, WIDTH, dtype=f64) for _ in range(tables)], dtype=f64)
    net.add("emb", embedding, ["tok"] * tables)
    window = ContextProjection(WIDTH, CONTEXT, dtype=f64)
    net.add("ctx", Mixed([window], dtype=f64), ["emb"])
    return net


def lengths_in_order(in_order: Sequence[int] = IN_ORDER, seed: int = 0) -> np.ndarray:
    """Sentence lengths that epoch 0 of a shuffle from ``seed`` visits as ``in_order``."""
    lengths = np.zeros(len(in_order), np.int64)
    lengths[epoch_permutation(len(in_order), seed, 0)] = in_order
    return lengths


def sentences(lengths: Sequence[int], seed: int = 1) -> dict[str, np.ndarray]:
    """Random tokens and per-token labels for sentences of ``lengths``, one label per
    sentence, and the offsets."""
    rng = np.random.default_rng(seed)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return {
        "seq_starts": starts,
        "tok": rng.integers(0, VOCAB, starts[-1]),
        "label": rng.integers(0, CLASSES, starts[-1]),
        "sentence_label": rng.integers(0, CLASSES, len(lengths)),
    }


def tagged_set(lengths: Sequence[int] = (), seed: int = 1) -> SequenceSet:
    """:func:`sentences` as the tagger's set (per-token labels), of :func:`lengths_in_order`
    where ``lengths`` is empty."""
    d = sentences(lengths if len(lengths) else lengths_in_order(), seed)
    return SequenceSet({"tok": d["tok"], "label": d["label"]}, d["seq_starts"], name="tagged")


def labelled_set(lengths: Sequence[int] = (), seed: int = 1) -> SequenceSet:
    """:func:`sentences` as the classifier's set (a label per sentence)."""
    d = sentences(lengths if len(lengths) else lengths_in_order(), seed)
    per = {"label": d["sentence_label"]}
    return SequenceSet({"tok": d["tok"]}, d["seq_starts"], per, name="labelled")


def by_hand(
    net: Network,
    data: SequenceSet,
    epochs: int,
    per_sentence: bool = False,
    seed: int = 0,
    sync: SyncStrategy | None = None,
) -> dict[str, np.ndarray]:
    """Train ``net`` one process, :data:`GLOBAL` sentences a step in the Trainer's order, with
    a loop of its own: each step's rows gathered sentence by sentence, the count its tokens
    (its sentences where ``per_sentence``), a step of no token skipped under a per-token loss
    (a per-sentence one scores the pooled empty sentences). Returns the weights."""
    if sync is None:
        sync = LocalSync(create_optimizer(**OPTIMIZER))
        sync.setup(net.parameters())
    starts, n = data.seq_starts, len(data)
    for epoch in range(epochs):
        order = epoch_permutation(n, seed, epoch)
        for step in range(0, n, GLOBAL):
            chosen = order[step : step + GLOBAL]
            rows = [np.arange(starts[i], starts[i + 1]) for i in chosen]
            taken = np.concatenate(rows)
            count = len(chosen) if per_sentence else len(taken)
            if not count:
                continue  # no token anywhere in the step, for a per-token loss: no update
            offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
            feeds = {"tok": Arg(ids=data.rows["tok"][taken], seq_starts=offsets, needs_grad=False)}
            labels = (
                data.per_sequence["label"][chosen] if per_sentence else data.rows["label"][taken]
            )
            feeds["label"] = Arg(ids=labels, needs_grad=False)
            sync.start_step(count)
            net.forward(feeds)
            net.backward(sync.on_gradient, loss="loss", loss_scale=count)
            sync.finish_step()
    return weights(net)
