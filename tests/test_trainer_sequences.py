"""The Trainer on ragged sequences (a ``SequenceSet``), in one process: it trains as a loop written
by hand that feeds the same sentences (float64, to 1e-12), counting tokens for a per-token loss
and sentences for a per-sentence one; a step of no token changes nothing; a count the set
guesses wrong stops at the first forward; ``evaluate`` weighs every token alike; the data checks
read the set."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.data import DataError
from distconv.equivalence import mismatch, weights
from distconv.layers import FullyConnected, LayerError, MSELoss, SequencePool
from distconv.layers.base import Layer
from distconv.optim import create_optimizer
from distconv.sequence_set import SequenceSet
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.sequence_tagger import (
    CLASSES,
    CONTEXT,
    GLOBAL,
    OPTIMIZER,
    WIDTH,
    _windows,
    by_hand,
    classifier,
    labelled_set,
    tagged_set,
    tagger,
)


def fitted(net, data, epochs=2, batch_size=GLOBAL, accumulate=1, test=None, **kw):
    """``net`` trained by the Trainer on one process; returns the trainer."""
    sync = LocalSync(create_optimizer(**OPTIMIZER))
    trainer = Trainer(
        net, sync, batch_size, accumulate=accumulate, progress=False, dtype="float64", **kw
    )
    trainer.fit(data, test, epochs)
    return trainer


@pytest.mark.parametrize("accumulate", [1, 2])
def test_a_tagger_trains_as_a_loop_by_hand_that_counts_tokens(accumulate):
    """Sentences of length 0, a step of no token, an empty accumulated pass, a short last
    step: the Trainer's weights are the hand loop's."""
    data = tagged_set()
    expected = by_hand(tagger(), data, 2)
    trainer = fitted(tagger(), data, 2, GLOBAL // accumulate, accumulate)
    got = weights(trainer.network)
    assert (wrong := mismatch(expected, got, 1e-12)) is None, wrong
    assert mismatch(weights(tagger()), got) is not None  # trained: not the start
    record = trainer.history[-1]
    assert record["step"] == 8  # 15 sentences, 4 a step: the empty step counts as a step
    assert record["global_batch"] == GLOBAL  # sentences a step


def test_a_step_of_no_token_changes_neither_weights_nor_optimizer_state():
    """Two sentences, one a step: the empty one's step is skipped, so two epochs train as two
    steps of the other alone (Adam, whose update moves the weights even for a zero gradient)."""
    data = tagged_set([0, 3])
    trainer = fitted(tagger(), data, 2, batch_size=1)
    alone = tagged_set([3])
    assert data.rows["tok"].tolist() == alone.rows["tok"].tolist()
    reference = fitted(tagger(), alone, 2, batch_size=1)
    got, expected = weights(trainer.network), weights(reference.network)
    assert (wrong := mismatch(expected, got, 1e-12)) is None, wrong
    assert trainer.pos.step == 4 and reference.pos.step == 2
    assert _same_state(trainer.sync, reference.sync)  # Adam's step count too


def _same_state(a, b) -> bool:
    """Whether two LocalSyncs hold equal optimizer state (Adam's moments and step count)."""
    sa, sb = a.state, b.state
    return sa.keys() == sb.keys() and all(
        all(np.array_equal(np.asarray(sa[k][f]), np.asarray(sb[k][f])) for f in sa[k]) for k in sa
    )


def test_a_label_per_sentence_trains_as_a_loop_by_hand_that_counts_sentences():
    data = labelled_set()
    expected = by_hand(classifier(), data, 2, per_sentence=True)
    trainer = fitted(classifier(), data, 2)
    assert trainer.history[0]["global_batch"] == GLOBAL
    got = weights(trainer.network)
    assert (wrong := mismatch(expected, got, 1e-12)) is None, wrong


def pooled_regression(mean_over=None):
    """A model whose loss reads no feed of its set (both of its inputs pooled per sentence),
    and its set: the count the set guesses (tokens) is not the loss's rows (sentences)."""
    from distconv.init import set_seed
    from distconv.layers import FullyConnected, Mixed
    from distconv.layers.projection import TableProjection
    from distconv.network import Network

    set_seed(0)
    net = Network()
    table = TableProjection(20, 2, dtype=np.float64)
    net.add("emb", Mixed([table], dtype=np.float64), ["tok"])
    net.add("pool", SequencePool("average"), "emb")
    net.add("guess", FullyConnected(2, 1, dtype=np.float64), "pool")
    net.add("goal", SequencePool("average"), "target")
    net.add("loss", MSELoss(), ["guess", "goal"])
    lengths = [2, 3, 1, 4]
    rng = np.random.default_rng(0)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    rows = {"tok": rng.integers(0, 20, starts[-1]), "target": rng.standard_normal((10, 1))}
    return net, SequenceSet(rows, starts, name="pooled", mean_over=mean_over)


def unstepped(net, data, **kw):
    """The DataError ``fit`` of ``net`` on ``data`` stops with, after checking that it stopped
    before its first step (no step counted, no weight moved)."""
    before = weights(net)
    sync = LocalSync(create_optimizer(**OPTIMIZER))
    trainer = Trainer(net, sync, 2, progress=False, dtype="float64", **kw)
    with pytest.raises(DataError) as caught:
        trainer.fit(data, None, 1)
    assert trainer.pos.step == 0
    assert mismatch(weights(net), before, 0.0) is None
    return str(caught.value)


def test_a_count_guessed_wrong_stops_before_the_first_step_naming_what_to_set():
    net, data = pooled_regression()
    said = unstepped(net, data)
    # the data checks' example, its first sentence: its one row at the loss, its two tokens
    assert "'loss' takes its mean over 1 rows, but the batch of 1 sequence(s) of 'pooled'" in said
    assert "counts 2 rows" in said
    assert "mean_over='sequences'" in said
    net, data = pooled_regression("sequences")
    trainer = fitted(net, data, 1, batch_size=2)  # told: it trains
    assert trainer.history[0]["step"] == 2


def test_a_count_set_wrong_is_refused_before_a_step_though_the_first_sentence_has_one_token():
    """A sentence of one token counts one row and one sequence alike: the data checks' example
    was the first sentence that held a row, so a pooled loss told to count rows passed them
    and stopped at the step that first drew a longer sentence (on one rank, while another
    waited in its step)."""
    d = labelled_set([1, 3, 2, 0, 4])
    told = SequenceSet(d.rows, d.seq_starts, d.per_sequence, name="told", mean_over="rows")
    said = unstepped(classifier(), told)
    assert "takes its mean over 1 rows, but the batch of 1 sequence(s) of 'told' counts 3" in said
    assert "mean_over='sequences'" in said


@pytest.mark.parametrize("mean_over", [None, "sequences"])
def test_a_loss_of_neither_tokens_nor_sentences_is_refused_without_a_mean_over_to_set(mean_over):
    """A SequenceConcat of two row feeds reads two rows a token: no mean_over counts that,
    so the refusal names none to set (it named one, then the other once that was set)."""
    from distconv.init import set_seed
    from distconv.layers import FullyConnected, Mixed
    from distconv.layers.projection import TableProjection
    from distconv.layers.sequence import SequenceConcat
    from distconv.network import Network

    set_seed(0)
    net = Network()
    net.add("a", Mixed([TableProjection(20, 2, dtype=np.float64)], dtype=np.float64), ["tok"])
    net.add("b", Mixed([TableProjection(20, 2, dtype=np.float64)], dtype=np.float64), ["tok"])
    net.add("both", SequenceConcat(2), ["a", "b"])
    net.add("guess", FullyConnected(2, 1, dtype=np.float64), "both")
    net.add("goal", SequenceConcat(1), ["y", "y"])
    net.add("loss", MSELoss(), ["guess", "goal"])
    rng = np.random.default_rng(0)
    rows = {"tok": rng.integers(0, 20, 6), "y": rng.standard_normal((6, 1))}
    data = SequenceSet(rows, np.array([0, 2, 2, 6]), mean_over=mean_over)
    said = unstepped(net, data, accuracy=None)
    # the data checks' example, the first sentence of two tokens or more: four rows
    assert "'loss' takes its mean over 4 rows, but the batch of 1 sequence(s) " in said
    assert "mean_over=" not in said
    assert "cannot train a loss that reads another number of rows" in said


def test_evaluate_weighs_every_token_alike():
    """The test loss and accuracy of a set of ragged sentences, batches of 2 sentences (one of
    them only empty ones), equal the mean over its tokens of one forward of them all."""
    data = tagged_set()
    trainer = fitted(tagger(), data, 1)
    got = trainer.evaluate(data, batch_size=2)
    net = trainer.network
    feeds = {
        "tok": Arg(ids=data.rows["tok"], seq_starts=data.seq_starts, needs_grad=False),
        "label": Arg(ids=data.rows["label"], needs_grad=False),
    }
    logits = net.forward(feeds)["out"].value
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    labels = data.rows["label"]
    loss = -log_p[np.arange(len(labels)), labels].mean()
    accuracy = (logits.argmax(axis=1) == labels).mean()
    assert abs(got["test_loss"] - loss) < 1e-12
    assert abs(got["test_acc"] - accuracy) < 1e-12


def test_fit_refuses_a_token_label_past_the_classes_naming_its_row_and_sentence():
    data = tagged_set()
    labels = data.rows["label"].copy()
    labels[7] = 3  # the tagger scores 3 classes
    bad = SequenceSet({"tok": data.rows["tok"], "label": labels}, data.seq_starts)
    s = int(np.flatnonzero(data.seq_starts <= 7)[-1])  # the last sentence to start by row 7
    assert data.seq_starts[s] <= 7 < data.seq_starts[s + 1]
    with pytest.raises(DataError) as caught:
        fitted(tagger(), bad, 1)
    said = str(caught.value)
    assert "'label' holds 1 row(s) outside [0, 3)" in said
    assert said.endswith(f": row 7 (row {7 - data.seq_starts[s]} of sequence {s})"), said


def test_a_label_past_the_classes_in_the_checked_sentence_is_named_by_its_row_and_sentence():
    """The data checks forward one sentence of the set (its first of two tokens or more) to
    check its count; a label past the classes in that sentence is still refused by the label
    check, naming its row and sentence. The count's forward came first, with the set's own
    labels, and stopped the fit on the loss's words, which name neither."""
    data = tagged_set()
    first = int(data.first_example()[0])
    row = int(data.seq_starts[first]) + 1
    labels = data.rows["label"].copy()
    labels[row] = 3  # the tagger scores 3 classes
    bad = SequenceSet({"tok": data.rows["tok"], "label": labels}, data.seq_starts)
    with pytest.raises(DataError) as caught:
        fitted(tagger(), bad, 1)
    said = str(caught.value)
    assert "'label' holds 1 row(s) outside [0, 3)" in said, said
    assert said.endswith(f": row {row} (row 1 of sequence {first})"), said


def test_fit_refuses_a_test_set_the_model_cannot_read():
    data = tagged_set()
    other = SequenceSet(
        {"tok": data.rows["tok"].astype(np.float64)[:, None], "label": data.rows["label"]},
        data.seq_starts,
    )
    with pytest.raises(DataError, match="the test set does not fit the model"):
        fitted(tagger(), data, 1, test=other)


def test_fit_refuses_nan_in_a_row_feed_naming_its_row_and_sentence():
    rows = {"tok": np.arange(5), "label": np.zeros(5, np.int64), "x": np.zeros((5, 1))}
    rows["x"][[1, 3]] = np.nan
    # an empty sentence starts where row 2 does: the row is the sentence after it's
    data = SequenceSet(rows, np.array([0, 2, 2, 5]))
    with pytest.raises(DataError) as caught:
        fitted(tagger(), data, 1, batch_size=1)
    said = "the training set's 'x' holds NaN or infinity in 2 row(s): "
    assert str(caught.value) == said + "rows 1 (row 1 of sequence 0), 3 (row 1 of sequence 2)"


def test_a_resume_mid_epoch_gives_the_weights_and_metrics_of_an_uninterrupted_run(tmp_path):
    """Positions count steps of sentences, the skipped step of no token among them."""
    data = tagged_set()
    whole = fitted(tagger(), data, 2, out_dir=tmp_path / "whole")
    first = fitted(tagger(), data, 2, out_dir=tmp_path / "split", checkpoint_every=3)
    for m in first.checkpoints.run.manifests():  # as if killed after step 6, in epoch 2
        if m.step > 6:
            m.path.unlink()
    sync = LocalSync(create_optimizer(**OPTIMIZER))
    again = Trainer(
        tagger(5), sync, GLOBAL, progress=False, dtype="float64", out_dir=tmp_path / "split"
    )
    history = again.fit(data, None, 2, resume=True)
    assert again.pos.step == 8 and [r["epoch"] for r in history] == [2]
    assert mismatch(weights(whole.network), weights(again.network), 0.0) is None
    keep = ("train_loss", "train_acc", "step", "global_batch")
    assert {k: history[0][k] for k in keep} == {k: whole.history[1][k] for k in keep}
    # one rank: its rate is the job's, its steps before the resume counted in tokens too
    rate = history[0]["examples_per_second"]
    assert history[0]["examples_per_second_per_rank"] == [pytest.approx(rate, rel=1e-12)]


def test_a_sequence_model_fed_flat_arrays_is_pointed_to_a_sequence_set():
    data = tagged_set()
    flat = {"tok": data.rows["tok"], "label": data.rows["label"]}
    with pytest.raises(LayerError, match=r"needs a sequence input .*SequenceSet"):
        fitted(tagger(), flat, 1)


def test_labels_per_token_for_a_loss_per_sentence_are_refused_saying_where_they_go():
    """The classifier pools each sentence; its labels handed one a token (in ``rows``) stopped
    on the loss's own words, "28 labels for a batch of 1 rows", naming neither the set nor
    ``per_sequence``."""
    d = tagged_set()  # per-token labels, under the name the classifier reads
    with pytest.raises(DataError) as info:
        fitted(classifier(), d, 1)
    said = str(info.value)
    assert said.startswith("'tagged': the labels 'label' of SoftmaxCrossEntropy 'loss' are one a")
    assert "pass one label per sequence in per_sequence" in said


def test_labels_per_sentence_for_a_loss_per_token_are_refused_saying_where_they_go():
    with pytest.raises(DataError) as info:
        fitted(tagger(), labelled_set(), 1)
    said = str(info.value)
    assert said.startswith("'labelled': the labels 'label' of SoftmaxCrossEntropy 'loss' are one")
    assert "pass one label per row in rows, or pool the rows (SequencePool) first" in said


def test_another_layer_error_of_a_sequence_model_is_its_own():
    """Only a loss that ran in this forward, reading labels of the other kind, is said so: a
    layer failing earlier keeps its own words."""
    d = tagged_set()
    # float tokens: an id past the table is refused before the forward, by the set's check
    wrong = SequenceSet({"tok": d.rows["tok"] + 0.5, "label": d.rows["label"]}, d.seq_starts)
    with pytest.raises(LayerError, match="TableProjection"):
        fitted(tagger(), wrong, 1)


class _TokensVote(Layer):
    """A loss of one's own that reads the other kind on purpose: each token's logits scored
    against its sentence's label (one a sequence); it checks its classes first."""

    num_inputs = 2

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.classes = classes

    def _forward(self, logits, label):
        if logits.value.shape[1] != self.classes:
            raise self.fail(f"logits of {logits.value.shape[1]} classes, built for {self.classes}")
        raise NotImplementedError  # never reached here


def test_a_loss_of_ones_own_reading_the_other_kind_keeps_its_own_words():
    """Only distconv's losses read one label a row of their input: a loss of one's own that
    reads a label a sentence beside one row a token, failing for its own reason, was told to
    move its labels into rows, its own words ("built for 4") left in the chained error."""
    net = _windows(0)
    net.add("out", FullyConnected(WIDTH * CONTEXT, CLASSES, dtype=np.float64), "ctx")
    net.add("loss", _TokensVote(CLASSES + 1), ["out", "label"])
    with pytest.raises(LayerError, match="logits of 3 classes, built for 4"):
        fitted(net, labelled_set(), 1)


def test_evaluate_on_an_empty_set_is_a_data_error_naming_it():
    trainer = fitted(tagger(), tagged_set(), 1)
    empty = SequenceSet(
        {"tok": np.zeros(0, np.int64), "label": np.zeros(0, np.int64)}, np.zeros(1, np.int64)
    )
    with pytest.raises(DataError, match="cannot evaluate on an empty data set 'sequence set'"):
        trainer.evaluate(empty)
    with pytest.raises(DataError, match="cannot evaluate on an empty data set$"):
        trainer.evaluate({"tok": np.zeros(0, np.int64), "label": np.zeros(0, np.int64)})
