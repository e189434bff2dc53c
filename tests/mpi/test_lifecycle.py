"""A sync beyond one fit (a second setup), how a rank ends it (``sys.exit``), a failure on the
communication thread outside a reduction, when each bucket's update runs, and a parameter
frozen between ``Trainer()`` and ``fit``: world size 1 in this process, and real
``mpiexec -n 2``."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi.buckets import Bucket
from distconv.sync.mpi.thread import CommThread
from distconv.trainer import Trainer
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script, small_lenet, trainer_data, weights
from tests.mpi.run_lifecycle import threads


def needs_mpiexec(test):
    for mark in NEEDS_MPIEXEC:
        test = mark(test)
    return test


def _fit_twice(sync) -> tuple[dict[str, np.ndarray], int]:
    """Weights after two fits on two data sets, and the communication threads alive then."""
    net = small_lenet(seed=0)
    try:
        trainer = Trainer(net, sync, 2, progress=False, dtype="float64")
        trainer.fit(trainer_data(24), epochs=1)
        trainer.fit(trainer_data(24, seed=4), epochs=1)
        alive = threads()
    finally:
        sync.close()
    return weights(net), alive


@pytest.mark.timeout(60)
def test_a_second_fit_replaces_the_thread_and_trains_as_one_process():
    """Each fit sets the sync up; the second stops the first's thread and frees its
    communicator (before, both lived on, and the old pump kept the old communicator)."""
    before = threads()
    want, _ = _fit_twice(LocalSync(create_optimizer("adam", lr=0.01)))
    sync = MPISync(create_optimizer("adam", lr=0.01), comm=SingleRankComm(), overlap=True)
    got, alive = _fit_twice(sync)
    assert alive == before + 1 and threads() == before
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@needs_mpiexec
@pytest.mark.timeout(120)
def test_a_second_fit_over_mpi_frees_the_first_communicator(tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script("run_lifecycle.py"), str(tmp_path), "refit"], timeout=100)
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        facts = json.loads((tmp_path / f"refit{rank}.json").read_text())
        assert facts == {"alive": 1, "after_close": 0, "freed": True}, (rank, facts)
    ranks = [dict(np.load(tmp_path / f"values{r}.npz")) for r in (0, 1)]
    for name, value in ranks[0].items():
        np.testing.assert_array_equal(ranks[1][name], value, err_msg=name)


@needs_mpiexec
@pytest.mark.timeout(60)
@pytest.mark.parametrize("code", [0, 3])
def test_sys_exit_in_a_try_finally_that_closes_the_sync_is_the_jobs_status(tmp_path, code):
    """``sys.exit(0)`` is a clean end (before, close took it for a failure and aborted the job
    with status 1); another number aborts the job with that status."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script("run_lifecycle.py"), str(tmp_path), f"exit{code}"])
    assert proc.returncode == code, proc.stderr
    assert ("aborting the MPI job" in proc.stderr) == bool(code), proc.stderr


@pytest.mark.timeout(30)
def test_each_bucket_is_updated_while_the_later_ones_travel(monkeypatch):
    """With the thread, a bucket whose every gradient fired here is updated as soon as it is
    reduced: the last bucket's reduction waits here until the first bucket's update has run
    (before, every update waited for the ranks' flags, queued behind the last reduction)."""
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm(), overlap=True, bucket_bytes=64)
    params = small_lenet(seed=0).parameters()[:3]
    sync.setup(params, {})
    first_updated, late = threading.Event(), []
    reduce_on_thread = Bucket.reduce_on_thread

    def last_waits(bucket, *args):
        if bucket is sync.buckets[-1]:
            late.append(not first_updated.wait(5))
        reduce_on_thread(bucket, *args)

    apply = sync._apply

    def note(bucket, used):
        apply(bucket, used)
        first_updated.set()

    monkeypatch.setattr(Bucket, "reduce_on_thread", last_waits)
    monkeypatch.setattr(sync, "_apply", note)
    assert len(sync.buckets) > 1
    try:
        sync.start_step(1)
        for p in reversed(params):
            p.grad += 1.0
            p.inc_update(sync)
        sync.finish_step()
    finally:
        sync.close()
    assert late == [False]


@pytest.mark.timeout(10)
def test_a_zeroing_that_fails_on_the_thread_is_named_not_waited_for():
    """The thread zeroes used buffers between reductions; a failure there is the thread's
    failure (before, the thread died and the next wait for it never ended)."""
    thread = CommThread(lambda bucket, wait, piece: None, poll_seconds=0)
    buffer = np.ones(3)
    buffer.flags.writeable = False
    thread.zero(buffer)
    done = thread.call(lambda wait: None, "the next collective")
    with pytest.raises(SyncError, match="zeroing a used gradient buffer failed"):
        thread.finish(done)
    thread.stop()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make", [LocalSync, lambda opt: MPISync(opt, comm=SingleRankComm())])
def test_a_parameter_frozen_before_fit_is_not_handed_over_in_an_empty_pass(make):
    """One example, two passes a step: the first step's second pass is empty, and the Trainer
    hands every gradient over itself; not that of a parameter frozen after ``Trainer()``
    (before: MPISync refused it as "not given to setup", LocalSync raised a TypeError)."""
    net = small_lenet(seed=0)
    fresh = weights(net)
    sync = make(create_optimizer("sgd", lr=0.1))
    frozen = net.parameters()[0]
    try:
        trainer = Trainer(net, sync, 1, accumulate=2, progress=False)
        frozen.set_static(True)
        trainer.fit(trainer_data(1), epochs=1)
    finally:
        sync.close()
    trained = weights(net)
    assert np.array_equal(trained[frozen.name], fresh[frozen.name])
    assert any(not np.array_equal(trained[n], fresh[n]) for n in fresh if n != frozen.name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make", [LocalSync, lambda opt: MPISync(opt, comm=SingleRankComm())])
def test_a_parameter_unfrozen_since_the_firing_order_was_recorded_is_handed_over(make):
    """The first fit records a firing order without the frozen parameter; unfrozen, it must
    still be handed over in an empty pass (before, its gradient was never applied: it did
    not train, and with LocalSync its gradient grew for ever)."""
    net = small_lenet(seed=0)
    sync = make(create_optimizer("sgd", lr=0.1))
    thawed = net.parameters()[0]
    try:
        thawed.set_static(True)
        trainer = Trainer(net, sync, 1, accumulate=2, progress=False)
        trainer.fit(trainer_data(1), epochs=1)
        assert thawed.name not in sync.firing_order
        thawed.set_static(False)
        net.reset_firing_order()
        before = thawed.value.copy()
        trainer.fit(trainer_data(1), epochs=2)
    finally:
        sync.close()
    assert not np.array_equal(thawed.value, before)
    np.testing.assert_array_equal(thawed.grad, 0)  # applied, then zeroed, every step


@pytest.mark.timeout(30)
@pytest.mark.parametrize("overlap", [False, True])
def test_a_parameter_frozen_mid_step_that_fired_nowhere_is_left_alone(overlap):
    """Nothing reduced of it goes to the optimizer, so nothing of it is checked: the step ends
    and the next lays the buckets out without it."""
    a, b = Parameter("a", np.ones(4)), Parameter("b", np.ones(4))
    sync = MPISync(create_optimizer("sgd", lr=0.5), comm=SingleRankComm(), overlap=overlap)
    try:
        sync.setup([a, b])
        for step in range(3):
            sync.start_step(1)
            a.grad += 1.0
            a.inc_update(sync)
            if step == 1:
                b.set_static(True)  # b has not fired this step
            elif step == 0:
                b.grad += 1.0
                b.inc_update(sync)
            sync.finish_step()
    finally:
        sync.close()
    np.testing.assert_array_equal(a.value, np.full(4, 1.0 - 3 * 0.5))
    np.testing.assert_array_equal(b.value, np.full(4, 0.5))  # the step it fired, only


def test_each_setup_decides_the_thread_from_what_was_asked(monkeypatch):
    """``overlap=None`` lets the machine decide (GPU gradients, spare cores); setup stored its
    decision over the setting, so a second setup (a second fit, the model moved to or from a
    GPU since) took the first one's answer as if the caller had asked for it."""
    from distconv.sync.mpi import sync as sync_module

    machine, asked = iter([0.0, None]), []  # a thread the first time, none the second

    def decide(requested, comm, mpi, on_gpu, poll_seconds):
        asked.append(requested)
        answer = next(machine)
        return answer if requested is None else (0.0 if requested else None)

    monkeypatch.setattr(sync_module, "thread_poll_seconds", decide)
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm())
    p = Parameter("w", np.ones(4))
    try:
        sync.setup([p], {})
        assert sync.overlap is True and sync._thread is not None
        sync.setup([p], {})
        assert asked == [None, None]
        assert sync.overlap is False and sync._thread is None
    finally:
        sync.close()
