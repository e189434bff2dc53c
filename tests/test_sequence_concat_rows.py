"""A loss that reads neither one row a token nor one a sentence (a ``SequenceConcat`` of two row
feeds: two rows a token) is refused before the first step in the set's words, as
docs/operations.md "Sequences" says; the loss's own ("5 labels for a batch of 10 rows", "pred
shape (10, 3) differs from target shape (5, 3)") named neither the set nor the cause."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.data import DataError
from distconv.layers import (
    FullyConnected,
    Layer,
    LayerError,
    Mixed,
    MSELoss,
    SequenceConcat,
    SequencePool,
    SoftmaxCrossEntropy,
    TableProjection,
)
from distconv.optim import SGD
from distconv.sequence_set import OTHER_ROWS, SequenceSet
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(60)

STARTS = np.array([0, 2, 5, 9, 10])  # the checks forward the first of two rows or more


def _concat_model(loss: Layer, pooled: bool = False) -> Network:
    """Each sentence's embeddings followed by themselves (two rows a token), scored per row
    against the feed 'target', or per sentence where ``pooled``."""
    net = Network()
    net.add("emb", Mixed([TableProjection(12, 4)]), "tok")
    net.add("cat", SequenceConcat(), ["emb", "emb"])
    if pooled:
        net.add("pool", SequencePool(), "cat")
    net.add("out", FullyConnected(4, 3), "pool" if pooled else "cat")
    net.add("loss", loss, ["out", "target"])
    return net


def _tokens_and(target: np.ndarray) -> SequenceSet:
    tok = np.random.default_rng(0).integers(0, 12, STARTS[-1])
    return SequenceSet({"tok": tok, "target": target}, STARTS, name="s")


def _fit(loss: Layer, data: SequenceSet, tmp_path) -> Trainer:
    trainer = Trainer(
        _concat_model(loss), LocalSync(SGD(lr=0.1)), batch_size=2, out_dir=tmp_path / "run"
    )
    trainer.fit(data, epochs=1)
    return trainer


@pytest.mark.parametrize(
    ("loss", "target"),
    [
        (SoftmaxCrossEntropy, np.zeros(STARTS[-1], np.int64)),  # through the label check
        (MSELoss, np.zeros((STARTS[-1], 3), np.float32)),  # through the first forward
    ],
    ids=["softmax", "mse"],
)
def test_a_loss_of_two_rows_a_token_is_refused_in_the_sets_words(loss, target, tmp_path):
    said = (
        rf"^'s': {loss.__name__} 'loss' reads 4 rows where the batch holds 2 row\(s\) in 1 "
        r"sequence\(s\): neither one a row of the set nor one a sequence \(a SequenceConcat of "
        rf"two row feeds makes two a row\); {OTHER_ROWS}: train it in a loop of your own "
        r'\(docs/operations\.md, "Sequences"\)$'
    )
    with pytest.raises(DataError, match=said):
        _fit(loss(), _tokens_and(target), tmp_path)
    assert not list((tmp_path / "run").rglob("step-*")), "a checkpoint was written"


def test_the_words_name_no_layer_that_reads_one_row_a_token(tmp_path):
    """A model whose loss reads one row a token trains: the refusal is the concat's alone."""
    net = Network()
    net.add("emb", Mixed([TableProjection(12, 4)]), "tok")
    net.add("out", FullyConnected(4, 3), "emb")
    net.add("loss", SoftmaxCrossEntropy(), ["out", "target"])
    trainer = Trainer(net, LocalSync(SGD(lr=0.1)), batch_size=2)
    assert len(trainer.fit(_tokens_and(np.zeros(STARTS[-1], np.int64)), epochs=1)) == 1


@pytest.mark.parametrize(
    ("loss", "target"),
    [(SoftmaxCrossEntropy, np.zeros(4, np.int64)), (MSELoss, np.zeros((4, 3), np.float32))],
    ids=["softmax", "mse"],
)
def test_a_concat_pooled_to_its_sentences_trains(loss, target):
    """Two rows a token pooled to one row a sentence, scored against a label a sentence: what
    fit trains a SequenceConcat of one feed for; the refusal is not its."""
    tok = np.random.default_rng(0).integers(0, 12, STARTS[-1])
    data = SequenceSet({"tok": tok}, STARTS, {"target": target}, name="s")
    trainer = Trainer(_concat_model(loss(), pooled=True), LocalSync(SGD(lr=0.1)), batch_size=2)
    assert len(trainer.fit(data, epochs=1)) == 1


def test_a_pooled_concats_own_failure_keeps_the_losss_words():
    """A loss that reads one row a sentence and fails for a reason of its own (a target of
    another width) is told that reason, not that fit cannot train it."""
    tok = np.random.default_rng(0).integers(0, 12, STARTS[-1])
    data = SequenceSet({"tok": tok}, STARTS, {"target": np.zeros((4, 5), np.float32)}, name="s")
    trainer = Trainer(_concat_model(MSELoss(), pooled=True), LocalSync(SGD(lr=0.1)), batch_size=2)
    with pytest.raises(LayerError, match=r"^MSELoss 'loss': pred shape \(1, 3\) differs from "):
        trainer.fit(data, epochs=1)
