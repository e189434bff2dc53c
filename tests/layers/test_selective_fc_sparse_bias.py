"""``SelectiveFullyConnected(..., sparse=True)`` marks its bias ``sparse_rows`` as it marks its
weights, and reads the bias at the selected columns: a parameter server moved the whole bias
(``out_features`` wide) each way every step, 2.8 times the bytes of the sparse weight with
100 000 outputs and 1 % of them selected.

Checked through the real Trainer on real shards (127.0.0.1, port 0): float64 plain SGD on 2
workers and 2 shards ends with the weights of one process, trained in one go and stopped and
resumed from the chief's checkpoint on shards started afresh; the bias's bytes a step follow the
columns selected, not the layer's width.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.equivalence import Job, assert_matches_local, max_relative_difference, weights
from distconv.gradient_check import check_layer_grad
from distconv.layers import SelectiveFullyConnected, SoftmaxCrossEntropy
from distconv.optim import create_optimizer
from distconv.trainer import Trainer
from tests.sync.ps.ps_helpers import Shards, pserver_sync, restarted_pserver_sync

#: the layer's inputs and outputs, and the columns each sample selects
IN, OUT, K = 3, 40, 2
#: columns no sample selects: a lazy update leaves their weight rows and bias untouched
UNSELECTED = slice(30, OUT)


def sampled_softmax(seed: int, out: int = OUT, bias: bool = True, sparse: bool = True) -> Network:
    """A sampled softmax: a selective FC scoring each sample's ``K`` columns; its bias drawn
    from ``seed`` too, so that a worker whose bias the shards do not hand it differs.
    ``sparse=False`` marks the weight alone, as ``sparse=True`` did before it marked the bias."""
    net = Network()
    layer = SelectiveFullyConnected(IN, out, bias=bias, sparse=sparse, dtype=np.float64)
    if not sparse:
        layer.weight.mark_sparse_rows()
    if bias:
        layer.bias.value[...] = np.random.default_rng(seed).standard_normal(out)
    net.add("sfc", layer, ["x", "sel"])
    net.add("loss", SoftmaxCrossEntropy(), ["sfc", "label"])
    return net


def selections(examples: int, columns: int = UNSELECTED.start, seed: int = 3) -> dict:
    """Inputs, ``K`` distinct columns of the first ``columns`` per sample, and the position of
    the gold one among them."""
    rng = np.random.default_rng(seed)
    sel = np.stack([rng.choice(columns, K, replace=False) for _ in range(examples)])
    return {
        "x": rng.standard_normal((examples, IN)),
        "sel": sel,
        "label": rng.integers(0, K, examples),
    }


#: float64 plain SGD, where lazy updates equal dense ones
JOB = Job(model=sampled_softmax, dataset=selections, optimizer="sgd", lr=0.5)


@pytest.fixture
def shards(tmp_path):
    s = Shards(tmp_path)
    yield s
    s.stop()


def test_the_bias_is_marked_and_read_at_the_selected_columns():
    net = sampled_softmax(0)
    assert all(p.sparse_rows for p in net.parameters())
    feeds = {"x": np.zeros((2, IN)), "sel": Arg(ids=np.array([[7, 2], [2, 9]]))}
    read = {name: ids.tolist() for name, ids in net.rows_needed(feeds).items()}
    assert read == {"sfc.weight": [2, 7, 9], "sfc.bias": [2, 7, 9]}
    assert not SelectiveFullyConnected(IN, OUT).bias.sparse_rows  # dense unless asked
    assert SelectiveFullyConnected(IN, OUT, sparse=True, bias=False).weight.sparse_rows


def test_the_sparse_layer_s_gradients_agree_with_finite_differences(rng):
    """Its bias gradient lies in the selected columns alone (``test_selective_fc.py``), the
    rows a push carries."""
    layer = sampled_softmax(1)["sfc"]
    cols = Arg(ids=np.array([[4, 11], [11, 0], [5, 4]]))
    report = check_layer_grad(layer, [Arg(rng.standard_normal((3, IN))), cols])
    assert {"param sfc.bias", "param sfc.weight", "input 0"} <= set(report.diffs)


@pytest.mark.timeout(120)
def test_two_workers_on_two_shards_match_one_process(shards):
    endpoints = shards.start(2, workers=2)
    ranks = assert_matches_local(functools.partial(pserver_sync, endpoints), 2, JOB, timeout=90)
    start = weights(JOB.model_of(0))
    assert max_relative_difference(ranks[1], start) > 1e-2  # it trained
    for name in ("sfc.bias", "sfc.weight"):
        np.testing.assert_array_equal(ranks[0][name][UNSELECTED], start[name][UNSELECTED])


@pytest.mark.timeout(120)
def test_workers_stopped_and_resumed_on_new_shards_match_one_process(shards):
    """The bias the new shards hold comes from the chief's checkpoint alone; the resumed
    workers draw theirs from other seeds."""
    first, then = shards.start(2, workers=2), shards.start(2, workers=2)
    make = functools.partial(restarted_pserver_sync, first, then)
    ranks = assert_matches_local(make, 2, dataclasses.replace(JOB, restart_at=8), timeout=90)
    assert max_relative_difference(ranks[1], weights(JOB.model_of(0))) > 1e-2


@pytest.mark.timeout(120)
def test_the_bias_moves_the_rows_selected_not_the_layer_s_width(shards):
    """One worker, one shard, 8 steps of 16 samples x 2 of 20 000 columns; the bias's bytes
    are those of the same job without one taken from the job's. The whole float64 bias went
    each way every step: 16 times its 160 kB."""
    out, steps, batch = 20_000, 8, 16
    data = selections(steps * batch, columns=out)
    moved = {}
    for bias in (True, False):
        sync = pserver_sync(shards.start(1, workers=1), create_optimizer("sgd", lr=0.1), 0, 1)
        try:
            net = sampled_softmax(0, out, bias)
            Trainer(net, sync, batch, dtype=np.float64, progress=False).fit(data, epochs=1)
            moved[bias] = sync.traffic()["bytes_pushed"] + sync.traffic()["bytes_pulled"]
        finally:
            sync.close()
    whole = out * 8
    # the shards' seed carries the bias whole once; every step a few hundred bytes of rows
    assert whole < moved[True] - moved[False] < 2 * whole


def _adam_fit(shards: Shards, net: Network, data: dict, out_dir, epochs: int, resume: bool):
    """``net`` trained under Adam by one worker on a shard started afresh, checkpointing in
    ``out_dir`` every 2 steps of 8 samples; the Trainer."""
    sync = pserver_sync(shards.start(1, workers=1), create_optimizer("adam", lr=0.05), 0, 1)
    try:
        trainer = Trainer(net, sync, 8, dtype=np.float64, progress=False, out_dir=out_dir,
                          checkpoint_every=2)  # fmt: skip
        trainer.fit(data, epochs=epochs, resume=resume)
    finally:
        sync.close()
    return trainer


@pytest.mark.timeout(120)
def test_a_checkpoint_saved_with_the_bias_dense_resumes_with_it_sparse(shards, tmp_path):
    """A run saved before the bias was marked, under Adam (per-element step counts of a
    dense bias, per-row ones now), resumes on a new shard: the bias comes from the
    checkpoint, the columns no sample selects as they were saved."""
    data = selections(48)
    saved = _adam_fit(shards, sampled_softmax(0, sparse=False), data, tmp_path, 1, False)
    resumed = _adam_fit(shards, sampled_softmax(7), data, tmp_path, 2, True)
    assert resumed.pos.step == 12 and [h["epoch"] for h in resumed.history] == [2]
    assert resumed.network["sfc"].bias.sparse_rows
    bias = resumed.network["sfc"].bias.value
    np.testing.assert_array_equal(bias[UNSELECTED], weights(saved.network)["sfc.bias"][UNSELECTED])
    assert not np.array_equal(bias, weights(saved.network)["sfc.bias"])  # and it trained on


def _all_columns(seed: int, sparse: bool = True) -> Network:
    """:func:`sampled_softmax` of ``K`` columns, its weight drawn from ``seed`` as its bias
    is (not from the generator the nets made before it moved)."""
    net = sampled_softmax(seed, K, sparse=sparse)
    weight = net["sfc"].weight.value
    weight[...] = np.random.default_rng(seed + 1).standard_normal(weight.shape)
    return net


@pytest.mark.timeout(120)
def test_a_bias_saved_dense_resumes_sparse_with_its_adam_state(shards, tmp_path):
    """Every sample selects every column, where lazy updates are dense ones: an epoch with
    the bias dense, saved, then one resumed with it sparse ends where two epochs with it
    dense end, to the bit. The bias's Adam moments and step counts come from the checkpoint:
    started afresh, or counted from another step, they would not (the test above only
    sees the bias's values)."""
    data = selections(48, columns=K)
    straight = _adam_fit(shards, _all_columns(0, sparse=False), data, tmp_path / "a", 2, False)
    _adam_fit(shards, _all_columns(0, sparse=False), data, tmp_path / "b", 1, False)
    resumed = _adam_fit(shards, _all_columns(7), data, tmp_path / "b", 2, True)
    assert resumed.network["sfc"].bias.sparse_rows and resumed.pos.step == 12
    want, got = weights(straight.network), weights(resumed.network)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
