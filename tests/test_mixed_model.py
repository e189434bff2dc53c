"""Small models that mix the catalogue's layers learn synthetic tasks.

The text model, from Mixed layers (table + context projections), learns a sequence task.

Each token's label is the class of the token before it (a fixed class at a sequence's start), so
the model can only succeed if the context projection really brings in the previous row of the
same sequence, its trainable padding learns the start-of-sequence case, and every gradient
reaches the table through the network with plain SGD applied in the ``inc_update`` callback.
"""

import numpy as np

from distconv import Arg
from distconv.init import set_seed
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.layers.context import ContextProjection
from distconv.layers.mixed import Mixed
from distconv.layers.projection import TableProjection
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
    net = build_network()
    names = [p.name for p in net.parameters()]
    assert names[:3] == ["embed.proj0.weight", "context.proj0.weight", "context.bias"]
    losses = train(net)
    first, last = np.mean(losses[:3]), np.mean(losses[-5:])
    assert np.isfinite(losses).all()
    assert last < 0.5 * first, f"loss went from {first:.3f} to {last:.3f}"
    # every gradient was applied and cleared by the callback: nothing is left pending
    assert all(not p.grad.any() for p in net.parameters())


def make_pair_batch(rng, n_seqs=16):
    """Two sequence inputs per example; the task runs over their per-sequence concatenation."""
    la, lb = rng.integers(1, 5, n_seqs), rng.integers(0, 4, n_seqs)
    sa, sb = (np.concatenate([[0], np.cumsum(n)]) for n in (la, lb))
    a, b = rng.integers(0, VOCAB, sa[-1]), rng.integers(0, VOCAB, sb[-1])
    # the rows in SequenceConcat's order: seq 0 of a, seq 0 of b, seq 1 of a, ...
    joined = np.concatenate(
        [np.concatenate([a[sa[i] : sa[i + 1]], b[sb[i] : sb[i + 1]]]) for i in range(n_seqs)]
    )
    starts = sa + sb
    previous = np.roll(joined, 1) * CLASSES // VOCAB
    labels = np.where(np.isin(np.arange(len(joined)), starts[:-1]), START_CLASS, previous)
    return {
        "a": Arg(ids=a, seq_starts=sa),
        "b": Arg(ids=b, seq_starts=sb),
        "label": Arg(ids=labels.astype(np.int64)),
    }


def test_sequence_concat_model_learns_across_the_join():
    """Table projections embed two sequence inputs, SequenceConcat joins them per sequence, and
    a context projection must see the previous row of the joined sequence: loss falls only if
    SequenceConcat routes rows and gradients to the right places."""
    from distconv.layers import SequenceConcat

    set_seed(5)
    net = Network()
    net.add("embed_a", Mixed([TableProjection(VOCAB, EMBED)]), inputs="a")
    net.add("embed_b", Mixed([TableProjection(VOCAB, EMBED)]), inputs="b")
    net.add("joined", SequenceConcat(EMBED, bias=True), inputs=["embed_a", "embed_b"])
    window = ContextProjection(EMBED, 2, -1, trainable_padding=True)
    net.add("context", Mixed([window], bias=True, act="tanh"), inputs="joined")
    net.add("logits", FullyConnected(2 * EMBED, CLASSES), inputs="context")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["logits", "label"])
    rng = np.random.default_rng(1)

    def sgd(p):
        p.value -= 0.5 * p.grad
        p.grad[...] = 0

    losses = []
    for _ in range(60):
        out = net.forward(make_pair_batch(rng))
        assert out["joined"].seq_starts[-1] == len(out["joined"].value)
        losses.append(float(out["loss"].value))
        net.backward(sgd)
    first, last = np.mean(losses[:3]), np.mean(losses[-5:])
    assert last < 0.5 * first, f"loss went from {first:.3f} to {last:.3f}"


def test_3d_conv_net_learns_where_the_blob_is():
    """Conv3D -> MaxPool3D -> ConvTranspose3D -> FC on synthetic volumes: the loss falls.

    Each 6x6x6 volume holds a noisy ball whose centre sits in the front or the back half (the
    label), jittered by up to a voxel.
    """
    from distconv.layers import Conv3D, ConvTranspose3D, MaxPool3D
    from distconv.optim import create_optimizer
    from distconv.sync import create_sync

    rng = np.random.default_rng(0)
    grid = np.stack(np.meshgrid(*[np.arange(6.0)] * 3, indexing="ij"))  # (3, 6, 6, 6)

    def batch(n=16):
        labels = rng.integers(0, 2, n)
        centre = rng.uniform(1.5, 3.5, (n, 3))
        centre[:, 0] = np.where(labels == 0, 1.5, 3.5) + rng.uniform(-1, 1, n)
        dist = np.sqrt(((grid[None] - centre[:, :, None, None, None]) ** 2).sum(1))
        x = (dist < 1.5) + rng.normal(0, 0.3, dist.shape)
        return {
            "vol": Arg(x[:, None].astype(np.float32), needs_grad=False),
            "label": Arg(ids=labels),
        }

    set_seed(0)
    net = Network()
    net.add("conv", Conv3D(1, 4, 3, padding=1, act="relu"), inputs="vol")
    net.add("pool", MaxPool3D(2), inputs="conv")
    net.add("up", ConvTranspose3D(4, 2, 2, stride=2, act="relu"), inputs="pool")
    net.add("fc", FullyConnected(2 * 6 * 6 * 6, 2), inputs="up")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["fc", "label"])
    sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.01))
    sync.setup(net.parameters())
    losses = []
    for _ in range(40):  # the sync contract's step: the gradients arrive as sums over 16
        sync.start_step(16)
        losses.append(float(net.forward(batch(16))["loss"].value))
        net.backward(sync, loss="loss", loss_scale=16)
        sync.finish_step()
    first, last = np.mean(losses[:3]), np.mean(losses[-5:])
    assert last < 0.3 * first, f"loss went from {first:.3f} to {last:.3f}"


def test_a_window_without_the_previous_token_cannot_learn_it():
    """The control: the same model seeing rows t and t+1 only stays near chance."""
    losses = train(build_network(context_length=2, context_start=0))
    assert np.mean(losses[-5:]) > 0.75 * np.mean(losses[:3])
