"""Sparse tables end to end: ``examples/sparse_table.py``'s model, the real Trainer, real shards.

The table is marked sparse in the model (``TableProjection(..., sparse=True)``); nothing tells
the transport by hand. The Trainer asks the network which rows each batch reads and prefetches
them, the client pushes just those rows, and the result must equal one process training the
same model densely.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from ps_helpers import REPO_ROOT, run_ranks

from distconv.init import set_seed
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.sync.ps.client import PServerSync
from distconv.trainer import Trainer
from tests.child_env import child_path

EXAMPLE = REPO_ROOT / "examples" / "sparse_table.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("sparse_table_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EX = _load_example()


class _Traffic:
    """A Trainer monitor that keeps the sync's byte totals after every step."""

    def __init__(self) -> None:
        self.totals: list[float] = []

    def set_ready(self, ready: bool = True) -> None:
        pass

    def observe_step(self, seconds: float, samples: int, step: int | None = None) -> None:
        pass

    def beat(self, step: int | None = None) -> None:
        pass

    def record_totals(self, totals, source=None) -> None:
        self.totals.append(totals["bytes_pushed"] + totals["bytes_pulled"])

    def per_step(self) -> list[float]:
        """Bytes of each step after the first (the first also holds the start-up)."""
        return list(np.diff(self.totals))


def _net():
    set_seed(0)
    return EX.build_model()


def _sync(endpoints, rank: int, world: int) -> PServerSync:
    return PServerSync(
        create_optimizer("sgd", lr=0.2),
        rank=rank,
        world_size=world,
        pservers=endpoints,
        insecure=True,
        timeout=30,
    )


def _trainer(net, sync, batch: int, accumulate: int = 1, monitor=None) -> Trainer:
    return Trainer(
        net, sync, batch, accumulate=accumulate, dtype=np.float64, progress=False, monitor=monitor
    )


def _assert_trained_as(nets, ref) -> None:
    """Every rank's parameters equal ``ref``'s (a network trained in one process), every row of
    every table: a fit returns the trained model on each rank, not only on the chief."""
    for net in nets:
        for p, q in zip(net.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.value, q.value, rtol=1e-10, atol=1e-13, err_msg=p.name)


def _data(n: int, seed: int) -> dict[str, np.ndarray]:
    data = EX.make_data(n, seed)
    data["item"][::7] = -1  # "no row": padding must be neither pulled nor pushed
    return data


@pytest.mark.parametrize("accumulate", [1, 2])
@pytest.mark.timeout(120)
def test_two_workers_two_shards_equal_dense_single_process_training(shards, accumulate):
    train, test, epochs = _data(96, seed=1), _data(40, seed=2), 2
    ref = _trainer(_net(), LocalSync(create_optimizer("sgd", lr=0.2)), 16)
    ref_history = ref.fit(train, test, epochs)

    endpoints = shards.start(2, workers=2)
    nets = [_net() for _ in range(2)]
    monitors = [_Traffic() for _ in range(2)]

    def rank_fn(rank):
        sync = _sync(endpoints, rank, 2)
        try:
            trainer = _trainer(nets[rank], sync, 8 // accumulate, accumulate, monitors[rank])
            return trainer.fit(train, test, epochs)
        finally:
            sync.close()

    histories = run_ranks(rank_fn, 2)
    initial = _net().parameters()[0].value
    _assert_trained_as(nets, ref.network)
    for history in histories:
        for got, want in zip(history, ref_history):
            for key in ("train_loss", "test_loss"):
                assert got[key] == pytest.approx(want[key], rel=1e-10)
    table = nets[0].parameters()[0].value
    read = np.unique(train["item"][train["item"] >= 0])
    assert not np.array_equal(table[read], initial[read])
    assert np.array_equal(np.delete(table, read, axis=0), np.delete(initial, read, axis=0))
    # every step moved a few rows, never the table
    assert max(monitors[0].per_step()) < EX.VOCAB * EX.WIDTH * 8 / 100


@pytest.mark.timeout(120)
def test_a_table_unfrozen_between_trainer_and_fit_is_prefetched(shards):
    """Each fit takes the parameters trainable then, and whether a table's rows must be
    pulled before each forward (before, a table frozen at ``Trainer()`` and unfrozen before
    ``fit`` was trained with no row prefetched, reading whatever the worker held)."""
    train = _data(64, seed=1)
    ref = _trainer(_net(), LocalSync(create_optimizer("sgd", lr=0.2)), 16)
    ref.fit(train, epochs=2)
    endpoints = shards.start(1, workers=2)
    nets = [_net() for _ in range(2)]
    prefetched = [0, 0]

    def rank_fn(rank):
        sync, table = _sync(endpoints, rank, 2), nets[rank].parameters()[0]
        prefetch = sync.prefetch

        def counted(rows):
            prefetched[rank] += 1
            return prefetch(rows)

        sync.prefetch = counted
        try:
            table.set_static(True)
            trainer = _trainer(nets[rank], sync, 8)
            table.set_static(False)
            trainer.fit(train, epochs=2)
        finally:
            sync.close()

    run_ranks(rank_fn, 2)
    assert prefetched == [8, 8]  # 4 steps an epoch, one forward each
    _assert_trained_as(nets, ref.network)


@pytest.mark.timeout(120)
def test_bytes_per_step_grow_with_the_rows_read_not_the_table(shards, capsys):
    row = EX.WIDTH * 8 + 8  # a float64 row and its id
    per_step = {}
    for rows in (16, 256, 2048):
        data = EX.make_data(3 * rows, seed=rows)
        data["item"] = np.random.default_rng(rows).choice(EX.VOCAB, 3 * rows, replace=False)
        monitor, sync = _Traffic(), _sync(shards.start(1, workers=1), 0, 1)  # a job each
        try:
            _trainer(_net(), sync, rows, monitor=monitor).fit(data, epochs=1)
        finally:
            sync.close()
        per_step[rows] = max(monitor.per_step())
    table = EX.VOCAB * EX.WIDTH * 8
    with capsys.disabled():
        figures = ", ".join(
            f"{r} rows: {b:.0f} B ({b / table:.2e} of the table)" for r, b in per_step.items()
        )
        print(f"\nTrainer + sparse {EX.VOCAB}x{EX.WIDTH} float64 table, bytes per step: {figures}")
    for rows, moved in per_step.items():
        # the prefetch (ids out, rows back), the push and its reply (ids and rows each way)
        assert 3 * rows * row <= moved <= 4 * rows * row + 20_000
    assert per_step[16] < table / 500


@pytest.mark.timeout(240)
def test_the_example_runs_under_the_launcher_with_two_workers_and_two_shards(tmp_path):
    env = {**os.environ, "PYTHONPATH": child_path()}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_PSERVERS"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "local", "--workers", "2", "--servers", "2",
         "--run-dir", str(tmp_path / "run"), "--grace", "20", "--", str(EXAMPLE),
         "--epochs", "1", "--examples", "2048"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=220,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    out = done.stdout
    assert "[worker 0] test loss" in out and "[worker 1] test loss" not in out
    assert "rank 0: 5 parameters in" in out  # trained through the shards, not locally
    line = out.split("bytes moved by rank 0: ")[1].splitlines()[0]
    table = EX.VOCAB * EX.WIDTH * 4
    steps, in_all = (int(n) for n in re.findall(r"(\d+) in (?:1 epoch|all)", line))
    # the line once set the run's bytes beside one table, which they exceeded, as if the sparse
    # table moved whole: it says what a dense table moves in a step, and the steps' bytes apart
    # from the whole (start-up, the test set's rows; no checkpoint without --out)
    assert line.startswith(f"{steps} in 1 epoch(s) of 16 steps; a dense table moves {2 * table} ")
    assert f"; {in_all} in all, with start-up" in line, line
    # 16 steps move only rows; start-up seeds the shards with the table once
    assert 0 < steps < 16 * 2 * table / 100
    assert table + steps < in_all < table + 16 * 2 * table / 100
