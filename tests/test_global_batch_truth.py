"""A global batch larger than the training set: each epoch is one step of every example, as
PyTorch's DataLoader gives a short last batch, and the log and metrics.jsonl say the step's
real size, not the one asked for (it said ``global_batch: 100000`` of a step of 1438)."""

from __future__ import annotations

import json
import logging

import pytest

from distconv.data import split, synthetic
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync import create_sync
from distconv.trainer import Trainer
from tests.sync.threaded_sync import ThreadedSync, run_ranks
from tests.test_cli import distconv

TRAIN = 240  # examples in the training split below


def _data():
    return split(synthetic(n=320, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)


def _net():
    set_seed(0)
    return lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)


@pytest.mark.parametrize(
    "world, batch_size, accumulate, recorded",
    [
        (1, 16, 1, 16),  # a batch the data holds: as asked
        (1, 1000, 1, TRAIN),
        (1, 16, 20, TRAIN),  # 320 over passes
        (2, 150, 1, TRAIN),  # 300 over ranks, each batch the data holds
        (2, 60, 2, TRAIN),  # 240: exactly the data
    ],
)
def test_the_recorded_global_batch_is_what_a_step_trained_on(
    world, batch_size, accumulate, recorded, caplog
):
    train, _ = _data()
    nets = [_net() for _ in range(world)]

    def body(rank, w):
        sync = ThreadedSync(create_optimizer("sgd", lr=0.01), w, rank)
        t = Trainer(nets[rank], sync, batch_size, accumulate=accumulate, progress=False)
        return t.fit(train, epochs=2)

    with caplog.at_level(logging.WARNING, logger="distconv.trainer"):
        histories = run_ranks(world, body)
    for history in histories:  # every rank says the same
        assert [r["global_batch"] for r in history] == [recorded, recorded]
        steps = -(-TRAIN // (world * batch_size * accumulate))
        assert [r["step"] for r in history] == [steps, 2 * steps]
    asked = world * batch_size * accumulate
    said = f"the global batch asked for ({asked}: {world} worker(s) x batch size {batch_size}"
    assert (said in caplog.text) is (asked > TRAIN), caplog.text


def test_a_local_run_s_own_sync_agrees():
    """The plain single-process trainer (LocalSync), not the threaded test ranks."""
    train, _ = _data()
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.01))
    (record,) = Trainer(_net(), sync, 100_000, progress=False).fit(train, epochs=1)
    assert (record["global_batch"], record["step"]) == (TRAIN, 1)


@pytest.mark.timeout(60)
def test_distconv_train_logs_and_records_the_real_global_batch(tmp_path):
    out = tmp_path / "run"
    done = distconv(
        *("train", "--data", "synthetic", "--batch-size", "100000", "--epochs", "1"),
        *("--no-progress", "--out", str(out)),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (record,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    examples = int(done.stderr.split(" train, ")[0].rsplit(" ", 1)[1])  # "...: N train, ..."
    assert record["step"] == 1 and record["global_batch"] == examples < 100_000
    assert f"(global batch {examples})" in done.stderr
    assert "asked for (100000: 1 worker(s) x batch size 100000 x accumulate 1)" in done.stderr
