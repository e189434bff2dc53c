"""A worker that closes in the middle of a sync job (an exception, or fewer steps) ends it at
once, named with its error, instead of leaving the others to wait for its push until the
timeout: real shards, real workers (threads of this process) on 127.0.0.1."""

from __future__ import annotations

import threading
import time

import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.sync.base import SyncError

#: far over what any test here takes: without the rule, rank 0 would wait this long
TIMEOUT = 120
STEPS = 6


class Boom(RuntimeError):
    pass


def _job(endpoints, stops_after: int, raises: bool, order: str | None = None):
    """Rank 1 trains ``stops_after`` steps, then raises :class:`Boom` (``raises``) or just
    closes; rank 0 trains ``STEPS``. ``order`` puts rank 1's bye before rank 0's next push
    (``"bye first"``) or after it (``"push first"``, as far as a short wait can). Returns per
    rank what it raised (its message), or None."""
    data = batches(STEPS, 8)
    bye_sent, pushing = threading.Event(), threading.Event()

    def rank_1():
        net, sync = small_net(), insecure_worker(endpoints, 1, 2, timeout=TIMEOUT)
        try:
            sync.setup(net.parameters(), {"batch": 8})
            train_steps(net, sync, data[:stops_after], 1, 2)
            if order == "push first":
                pushing.wait(10)
                time.sleep(0.3)  # rank 0's push reaches the shard first
            if raises:
                raise Boom("out of memory in layer fc1")
        finally:
            sync.close()  # in the finally, as distconv.job does: the error goes along
            bye_sent.set()

    def rank_0():
        net, sync = small_net(), insecure_worker(endpoints, 0, 2, timeout=TIMEOUT)
        try:
            sync.setup(net.parameters(), {"batch": 8})
            train_steps(net, sync, data[:stops_after], 0, 2)
            if order == "bye first":
                bye_sent.wait(10)
            pushing.set()
            train_steps(net, sync, data[stops_after:], 0, 2)
        except SyncError as exc:
            return str(exc)
        finally:
            sync.close()

    results: list = [None, None]

    def run(rank):
        try:
            results[rank] = rank_0() if rank == 0 else rank_1()
        except Boom as exc:
            results[rank] = f"raised {exc}"

    run_ranks(run, 2, timeout=60)
    return results


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_shards", [1, 2])
@pytest.mark.parametrize("order", ["bye first", "push first"])
def test_a_worker_that_raised_mid_job_ends_it_at_once_naming_its_error(shards, num_shards, order):
    endpoints = shards.start(num_shards, workers=2, extra=["--timeout", str(TIMEOUT)])
    started = time.monotonic()
    rank0, rank1 = _job(endpoints, stops_after=3, raises=True, order=order)
    assert rank1 == "raised out of memory in layer fc1"
    assert rank0 is not None and time.monotonic() - started < TIMEOUT / 2, rank0
    assert "rank 1 (host" in rank0 and "last step 3, closed on Boom: out of memory in" in rank0
    assert "rank 0 (step 4) waits for its push: the step cannot complete without it" in rank0
    assert "job failed" in shards.log_text()


@pytest.mark.timeout(60)
def test_a_worker_that_closed_after_fewer_steps_ends_it_at_once(shards):
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    rank0, rank1 = _job(endpoints, stops_after=2, raises=False, order="bye first")
    assert rank1 is None
    assert rank0 is not None and "last step 2) closed, and rank 0 (step 3) waits" in rank0, rank0


@pytest.mark.timeout(60)
def test_in_async_mode_the_others_train_on_after_a_worker_raised(shards):
    """Nothing waits for a push in async mode: a worker gone is the timeout's business."""
    endpoints = shards.start(1, workers=2, mode="async", extra=["--timeout", str(TIMEOUT)])
    rank0, rank1 = _job(endpoints, stops_after=3, raises=True, order="bye first")
    assert rank1 == "raised out of memory in layer fc1" and rank0 is None
    assert "job failed" not in shards.log_text()


def test_the_error_a_worker_closes_on_is_one_short_line():
    from distconv.sync.base import describe_error

    said = describe_error(ValueError("a\nb " + "x" * 500))
    assert said.startswith("ValueError: a b xx") and len(said) == 300 and said.endswith("...")
