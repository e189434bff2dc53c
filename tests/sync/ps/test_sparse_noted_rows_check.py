"""What a sparse push does with the rows its layers noted (:mod:`distconv.layers.written_rows`)
where the scan of the whole gradient found other rows, on real shards (127.0.0.1, port 0).

A loop that prefetches a batch before ``sync.start_step`` pushes, of those rows, the ones the
step's backward wrote: a row written with an exactly zero gradient among them, so a lazy
optimizer's momentum, Adam moments and step count go on in it as one process's do, whether
``DISTCONV_CHECK_SPARSE_ROWS`` is set or not (set, it read the whole table instead and left
such rows out: momentum and Adam then trained otherwise than with it unset, and than one
process). Set, it refuses a row written but not noted; unset, that row's gradient is not
pushed, which the module says.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.equivalence import weights
from distconv.layers import SelectiveFullyConnected, SoftmaxCrossEntropy
from distconv.layers.written_rows import note_rows, take_rows
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError, SyncStrategy
from distconv.sync.local import LocalSync
from distconv.sync.ps.sparse import CHECK_ROWS_VARIABLE
from tests.sync.ps.ps_helpers import pserver_sync, sparse_table_net

#: each sample's two columns of four: every column is read by two samples each step
PAIRS = np.array([[0, 1], [2, 3], [0, 2], [1, 3]])


def selective_net() -> Network:
    """A float64 ``sparse=True`` selective FC of 3 inputs and 4 columns, under a softmax loss."""
    net = Network()
    layer = SelectiveFullyConnected(3, 4, sparse=True, dtype=np.float64)
    rng = np.random.default_rng(0)
    layer.weight.value[...] = rng.standard_normal(layer.weight.shape)
    layer.bias.value[...] = rng.standard_normal(layer.bias.shape)
    net.add("sfc", layer, ["x", "sel"])
    net.add("loss", SoftmaxCrossEntropy(), ["sfc", "label"])
    return net


def zero_row_batch(step: int) -> dict:
    """Every column selected; the samples selecting column ``step % 4`` have inputs of zeros,
    so that column's weight row is written with an exactly zero gradient (its bias is not)."""
    rng = np.random.default_rng(step)
    x = rng.standard_normal((len(PAIRS), 3))
    x[(PAIRS == step % 4).any(axis=1)] = 0
    return {"x": x, "sel": Arg(ids=PAIRS.copy()), "label": rng.integers(0, 2, len(PAIRS))}


def train_prefetching_before(
    net: Network, sync: SyncStrategy, batch: Callable[[int], dict | list[dict]], steps: int
) -> dict:
    """``steps`` steps of one's own loop that prefetches each step's first pass before
    ``start_step`` (``batch(step)``: its one pass, or a list of accumulated passes, the later
    ones prefetched in the step); the weights it ends with (``sync`` closed)."""
    try:
        sync.setup(net.parameters())
        for step in range(steps):
            passes = batch(step)
            passes = [passes] if isinstance(passes, dict) else passes
            sync.prefetch(net.rows_needed(passes[0]))  # no step open: the next one takes them
            sync.start_step(sum(len(feeds["label"]) for feeds in passes))
            for k, feeds in enumerate(passes):
                if k:
                    sync.prefetch(net.rows_needed(feeds))
                net.forward(feeds)
                last = k == len(passes) - 1
                fire = sync if last else (lambda p: None)
                net.backward(fire, loss="loss", loss_scale=len(feeds["label"]))
            sync.finish_step()
        return weights(net)
    finally:
        sync.close()


def assert_trains_as_one_process(shards, make_net, batch, optimizer: str, steps: int) -> None:
    """One worker on one shard ends with the weights of ``LocalSync`` on the same batches."""
    worker = pserver_sync(shards.start(1, 1), create_optimizer(optimizer, lr=0.1), 0, 1)
    ps = train_prefetching_before(make_net(), worker, batch, steps)
    one = LocalSync(create_optimizer(optimizer, lr=0.1))
    local = train_prefetching_before(make_net(), one, batch, steps)
    for name, value in local.items():
        np.testing.assert_allclose(ps[name], value, rtol=1e-12, atol=1e-14, err_msg=name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("check", [None, "1"])
@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_rows_written_with_a_zero_gradient_train_as_one_process(
    shards, monkeypatch, optimizer, check
):
    """Under the check too: it read the table for rows with a nonzero, and the row of zeros
    kept its momentum still (0.02 off one process's weights with momentum, 0.12 with Adam)."""
    if check is not None:
        monkeypatch.setenv(CHECK_ROWS_VARIABLE, check)
    assert_trains_as_one_process(shards, selective_net, zero_row_batch, optimizer, steps=6)


def _one_step_noting_too_few(shards, check, monkeypatch) -> tuple[Parameter, BaseException | None]:
    """A sparse table's step whose one user writes rows 1 and 2 and notes row 1 alone, row 2
    not prefetched (its ``rows_read`` missed it too): the push's table and error, if any."""
    if check is not None:
        monkeypatch.setenv(CHECK_ROWS_VARIABLE, check)
    table = Parameter("table", np.zeros((4, 2)), sparse_rows=True)
    table.shared_count = 1
    sync = pserver_sync(shards.start(1, 1), create_optimizer("sgd", lr=1.0), 0, 1)
    try:
        sync.setup([table])
        sync.start_step(1)
        sync.prefetch({"table": np.array([1])})
        table.grad[[1, 2]] = 1.0
        note_rows(table, np.array([1]))  # row 2 left out
        try:
            table.inc_update(sync)
            sync.finish_step()
        except SyncError as error:
            sync.abandon_step()
            return table, error
        return table, None
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_the_check_refuses_a_row_written_but_not_noted(shards, monkeypatch):
    table, error = _one_step_noting_too_few(shards, "1", monkeypatch)
    assert error is not None and "rows [2] have gradients that no layer noted" in str(error)
    assert CHECK_ROWS_VARIABLE in str(error) and "distconv.layers.written_rows" in str(error)
    assert "pushed only where this step prefetched them" in str(error)


@pytest.mark.timeout(60)
def test_without_the_check_a_row_written_but_not_noted_is_not_pushed(shards, monkeypatch):
    """What :mod:`distconv.layers.written_rows` says: the push does not see the row, which is
    not pushed, and its gradient stays (a Trainer refuses it after its first step; the check
    above, the gradient checks and the check under LocalSync find such a layer)."""
    table, error = _one_step_noting_too_few(shards, None, monkeypatch)
    assert error is None
    assert table.value[:, 0].tolist() == [0.0, -1.0, 0.0, 0.0]  # row 1 alone trained
    assert table.grad[2].tolist() == [1.0, 1.0]


@pytest.mark.timeout(60)
def test_an_abandoned_step_keeps_no_rows_noted_after_it(shards):
    """Each backward outside a step added its rows to the abandoned step's, kept until the
    next step began (a process that went on with another sync kept them all)."""
    table = Parameter("table", np.zeros((4, 2)), sparse_rows=True)
    sync = pserver_sync(shards.start(1, 1), create_optimizer("sgd", lr=1.0), 0, 1)
    try:
        sync.setup([table])
        sync.start_step(1)
        sync.abandon_step()
    finally:
        sync.close()
    note_rows(table, np.array([3]))
    assert take_rows(table) is None


@pytest.mark.timeout(60)
def test_a_sync_closed_mid_step_keeps_no_rows_noted_after_it(shards):
    """Closed in a step it never ended (an error between the step's start and its end, then
    ``close`` in a ``finally``), the sync kept the step's notes open: each later backward in the
    process added its rows to them, without end."""
    table = Parameter("table", np.zeros((4, 2)), sparse_rows=True)
    sync = pserver_sync(shards.start(1, 1), create_optimizer("sgd", lr=1.0), 0, 1)
    sync.setup([table])
    sync.start_step(1)
    with pytest.raises(SyncError, match="sync closed in the middle of step 0"):
        sync.close()
    note_rows(table, np.array([3]))
    assert take_rows(table) is None


def _adam_table_net() -> Network:
    """The sparse-table model (4 rows, every batch reads them all) with its classifier's
    weight zero: the first step writes each table row an exactly zero gradient."""
    net = sparse_table_net(vocab=4, width=3, classes=2)
    net["logits"].weight.value[...] = 0
    return net


def _words(step: int) -> dict:
    rng = np.random.default_rng(step)
    words = np.array([[0], [1], [2], [3], [-1], [2]])  # -1: no row, as padding
    return {"words": Arg(ids=words), "label": rng.integers(0, 2, len(words))}


@pytest.mark.timeout(60)
def test_a_table_projection_s_rows_train_as_one_process_with_adam(shards):
    """The table notes the ids it wrote (its -1 padding left out, which no prefetch holds):
    unnoted, its first step's rows of zeros were not pushed, their block's Adam step count
    stood still, and every later step's bias correction differed from one process's."""
    assert_trains_as_one_process(shards, _adam_table_net, _words, "adam", steps=4)


def _words_then_padding(step: int) -> list[dict]:
    """Two passes: every row of the table read in the first (prefetched before the step), none
    in the second (padding alone), so only the first pass's rows bring the block's push."""
    return [_words(step), {"words": Arg(ids=np.full((2, 1), -1)), "label": np.array([0, 1])}]


@pytest.mark.timeout(60)
def test_a_table_s_rows_train_as_one_process_with_adam_over_two_passes_a_step(shards):
    """The first pass's rows (prefetched before the step, each written an exactly zero
    gradient in the first step) are pushed from the table's notes though the second pass reads
    none: unnoted, they were left out, and the block's Adam step count stood still."""
    assert_trains_as_one_process(shards, _adam_table_net, _words_then_padding, "adam", steps=4)
