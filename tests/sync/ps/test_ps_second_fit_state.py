"""A second ``setup`` on the same shards (a second ``Trainer.fit`` in one process) keeps the
optimizer state of the parameters trained again, as LocalSync does: the seed
replaced it with the optimizer's fresh state, so momentum, lr 1, gradient 1, one step, a second
setup and one more step gave w = -2.0 where LocalSync gives -2.9; Adam's moments and step
count were lost alike. A new parameter of the same name (another model on this sync) starts
afresh on both.

A second setup cut short (a Ctrl-C or a lost rank) in its seed, at the barrier after its seed and
send-back, or while rank 0 reads the shards' state keeps that state for the next setup: it was
lost for good, the setup having forgotten which parameters the shards' state was of, so the next
setup seeded them afresh. Momentum, lr 1, gradient 1: -1, then -(0.9 + 1) = -2.9; the lost state
gave -2.0."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks, small_net

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import PER_ROW
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer

GRADS = [np.array([1.0, -2.0, 0.5]), np.array([0.25, 3.0, -1.0]), np.array([2.0, 0.0, 1.5])]


def _step(sync, params, grad) -> None:
    sync.start_step(1)
    for k, p in enumerate(params):
        p.grad[...] = grad * (k + 1)
        sync.on_gradient(p)
    sync.finish_step()


@contextlib.contextmanager
def _momentum_after_one_step(shards) -> Iterator[tuple[object, Parameter]]:
    """A worker of one shard, momentum with lr 1, that took one step of gradient 1 on w."""
    (endpoint,) = shards.start(1, workers=1)
    w = Parameter("w", np.zeros(1))
    sync = insecure_worker([endpoint], optimizer="momentum", lr=1.0)
    try:
        sync.setup([w])
        _step(sync, [w], np.ones(1))
        yield sync, w
    finally:
        sync.close()


def _params() -> list[Parameter]:
    # float64; "t" spans two 8-byte blocks a row
    return [Parameter("w", np.linspace(-1, 1, 3)), Parameter("t", np.ones(3))]


def _two_fits(sync, params, again=None) -> list[np.ndarray]:
    sync.setup(params)
    _step(sync, params, GRADS[0])
    sync.setup(again or params)  # the second fit
    for g in GRADS[1:]:
        _step(sync, again or params, g)
    return [p.value.copy() for p in again or params]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_a_second_setup_keeps_the_optimizer_state_as_local_sync_does(shards, name):
    endpoints = shards.start(2, workers=1)
    local = _two_fits(LocalSync(create_optimizer(name, lr=0.5)), _params())
    sync = insecure_worker(endpoints, optimizer=name, lr=0.5, block_bytes=16)
    try:
        remote = _two_fits(sync, _params())
        assert sync.state_dict()["w"]  # stateful: there was something to keep
    finally:
        sync.close()
    for ours, theirs in zip(remote, local):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


@pytest.mark.timeout(90)
def test_the_first_numbers_momentum_lr_1(shards):
    with _momentum_after_one_step(shards) as (sync, w):
        sync.setup([w])
        _step(sync, [w], np.ones(1))
        np.testing.assert_allclose(w.value, -2.9, rtol=0, atol=1e-12)  # -1, then -(0.9 + 1)


@pytest.mark.timeout(90)
def test_another_model_of_the_same_names_starts_afresh(shards):
    endpoints = shards.start(2, workers=1)
    local = _two_fits(LocalSync(create_optimizer("adam", lr=0.5)), _params(), _params())
    sync = insecure_worker(endpoints, optimizer="adam", lr=0.5, block_bytes=16)
    try:
        remote = _two_fits(sync, _params(), _params())
    finally:
        sync.close()
    for ours, theirs in zip(remote, local):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def _data(n: int = 32) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"image": rng.standard_normal((n, 1, 8, 8)), "label": rng.integers(0, 4, n)}


def _fit_twice(sync) -> list[np.ndarray]:
    net = small_net()
    trainer = Trainer(net, sync, 8, progress=False)
    trainer.fit(_data(), epochs=1)
    trainer.fit(_data(), epochs=2)  # a second fit: one epoch more
    return [p.value.copy() for p in net.parameters()]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_two_fits_through_the_shards_equal_two_local_fits(shards, name):
    endpoints = shards.start(2, workers=1)
    local = _fit_twice(LocalSync(create_optimizer(name, lr=0.05)))
    sync = insecure_worker(endpoints, optimizer=name, lr=0.05, block_bytes=256)
    try:
        remote = _fit_twice(sync)
    finally:
        sync.close()
    for ours, theirs in zip(remote, local):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


@pytest.mark.timeout(90)
def test_a_sparse_tables_row_counts_and_a_restored_state_survive_a_second_setup(shards):
    endpoints = shards.start(2, workers=1)
    table = Parameter("t", np.ones((6, 2)), sparse_rows=True)
    dense = Parameter("w", np.zeros(3))
    sync = insecure_worker(endpoints, optimizer="adam", lr=0.5, block_bytes=16)
    try:
        sync.setup([table, dense])
        for rows in ([0, 5], [5]):  # a row a block: each row its own step count
            sync.start_step(1)
            sync.prefetch({"t": rows})
            table.grad[rows] = 1.0
            sync.on_gradient(table)
            dense.grad[...] = 2.0
            sync.on_gradient(dense)
            sync.finish_step()
        before = sync.state_dict()
        assert before["t"]["step" + PER_ROW].tolist() == [1, 0, 0, 0, 0, 2]
        sync.setup([table, dense])
        _assert_state_equal(sync.state_dict(), before)
        # a checkpoint's state restored in the same process wins over the state kept
        restored = {"w": {k: np.full_like(np.asarray(v), 7) for k, v in before["w"].items()}}
        sync.setup([table, dense], state=restored)
        _assert_state_equal(sync.state_dict(), {"t": before["t"], **restored})
    finally:
        sync.close()


def _assert_state_equal(got, expected) -> None:
    assert got.keys() == expected.keys()
    for name in expected:
        assert got[name].keys() == expected[name].keys(), name
        for key in expected[name]:
            np.testing.assert_array_equal(got[name][key], expected[name][key], f"{name}/{key}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_two_workers_keep_the_state_through_a_second_setup(shards, mode):
    endpoints = shards.start(1, workers=2, mode=mode)

    def rank(r: int) -> np.ndarray:
        w = Parameter("w", np.zeros(1))
        sync = insecure_worker(endpoints, r, 2, optimizer="momentum", lr=1.0)
        try:
            for _ in range(2):  # two fits of one step, each rank 1 example of gradient 1
                sync.setup([w])
                sync.start_step(1)
                w.grad[...] = 1.0
                sync.on_gradient(w)
                sync.finish_step()
                sync.barrier()  # async: both steps are in before the next setup
                sync.refresh_parameters()  # async: rank 0 seeds its copy (see the review)
            sync.refresh_parameters()
            return w.value.copy()
        finally:
            sync.close()

    # sync: -1, then -(0.9 + 1); async: each push is a step of its own, four in all
    want = -2.9 if mode == "sync" else -(1 + 1.9 + 2.71 + 3.439)
    for value in run_ranks(rank, 2):
        np.testing.assert_allclose(value, want, rtol=0, atol=1e-12)


@pytest.mark.timeout(90)
def test_a_setup_cut_short_in_its_seed_keeps_the_state_for_the_next(shards, monkeypatch):
    with _momentum_after_one_step(shards) as (sync, w):
        seed = sync._seed

        def ctrl_c() -> None:
            seed()  # the shard holds a fresh state now
            raise KeyboardInterrupt

        monkeypatch.setattr(sync, "_seed", ctrl_c)
        with pytest.raises(KeyboardInterrupt):
            sync.setup([w])
        monkeypatch.setattr(sync, "_seed", seed)
        sync.setup([w])  # the state read before the Ctrl-C goes back
        _step(sync, [w], np.ones(1))
        np.testing.assert_allclose(w.value, -2.9, rtol=0, atol=1e-12)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("cut", ["_meet", "_gather_state"])  # _meet: setup's barrier
def test_a_setup_cut_short_after_reading_the_state_keeps_it_for_the_next(shards, monkeypatch, cut):
    with _momentum_after_one_step(shards) as (sync, w):
        real = getattr(sync, cut)

        def ctrl_c(*args, **kwargs):
            if cut == "_meet":
                real(*args)  # rank 0 seeded and sent the state back, then waits here
            raise KeyboardInterrupt

        monkeypatch.setattr(sync, cut, ctrl_c)
        with pytest.raises(KeyboardInterrupt):
            sync.setup([w])
        monkeypatch.setattr(sync, cut, real)
        sync.setup([w])
        _step(sync, [w], np.ones(1))
        np.testing.assert_allclose(w.value, -2.9, rtol=0, atol=1e-12)
