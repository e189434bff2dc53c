"""Ranks held on shard 0 at points of the job that can never meet are named at once, not after
the shard's timeout: real shards, real workers (threads of this process) on 127.0.0.1."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from hand_shard import BLOCKS, ROWS
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps.state import _Waiting
from distconv.sync.ps.stuck import stuck

#: far over what any test here takes: a job that waits for it hangs the test (run_ranks)
TIMEOUT = 120
MISMATCH = "ranks are at different points of the job"


def _job(shards, rank_next, steps: int = 2):
    """Two workers train ``steps`` steps, then rank r runs ``rank_next[r](sync, net, data)``.
    Returns per rank the message of the SyncError it raised, or None."""
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    data = batches(steps + 1, 8)

    def rank_fn(rank):
        net, sync = small_net(), insecure_worker(endpoints, rank, 2, timeout=TIMEOUT)
        try:
            sync.setup(net.parameters(), {"batch": 8})
            train_steps(net, sync, data[:steps], rank, 2)
            rank_next[rank](sync, net, data[steps:])
        except SyncError as exc:
            return str(exc)
        finally:
            sync.close()
        return None

    return run_ranks(rank_fn, 2, timeout=30)


def _sums(sync, net, data):
    sync.allreduce_sum([1.0, 2.0])


def _barrier(sync, net, data):
    sync.barrier()


def _step(sync, net, data):
    rank = sync.rank
    train_steps(net, sync, data, rank, 2)


def _close(sync, net, data):
    pass  # the caller's finally: bye


def _late_barrier(sync, net, data):
    time.sleep(0.5)  # rank 0 waits in its barrier meanwhile: a wait that will be answered
    sync.barrier()


def _doing(message: str, rank: int) -> str:
    """What ``message`` says rank ``rank`` was doing."""
    found = re.search(rf"rank {rank} \(host [^)]*\): (.*?)(?=; rank \d|\): )", message)
    assert found, message
    return found.group(1)


@pytest.mark.timeout(60)
def test_a_metrics_sum_and_a_barrier_are_named_at_once(shards):
    messages = _job(shards, [_sums, _barrier])
    for m in messages:  # both ranks stop, each with the shard's message
        assert m is not None and MISMATCH in m, messages
        assert "each rank waits in a collective another rank never makes" in m
    assert re.fullmatch(r"summing metrics \(allreduce:\d+\)", _doing(messages[0], 0))
    assert re.fullmatch(r"at a barrier \(barrier:\d+\)", _doing(messages[0], 1))
    assert "last step 2" in messages[0]  # steps numbered from 1: two done


@pytest.mark.timeout(60)
def test_a_metrics_sum_while_the_other_rank_steps_is_named_at_once(shards):
    messages = _job(shards, [_sums, _step])
    for m in messages:
        assert m is not None and "another is in a step, which needs its push" in m, messages
    assert _doing(messages[0], 1) == "pushed step 3, waiting for the others' pushes"


@pytest.mark.timeout(60)
def test_a_barrier_after_the_other_rank_closed_is_named_at_once(shards):
    messages = _job(shards, [_barrier, _close])
    assert messages[1] is None  # its bye is answered as usual
    assert messages[0] is not None and "a rank closed (bye) while another waits" in messages[0]
    assert _doing(messages[0], 1) == "closed"


@pytest.mark.timeout(60)
def test_a_rank_late_to_the_same_gather_is_waited_for(shards):
    assert _job(shards, [_barrier, _late_barrier]) == [None, None]


# -- the order of arrival, pinned: a shard handed its requests one by one ----------------------
def _push_w(h, rank: int, step: int) -> None:
    """Rank ``rank``'s sync push of step ``step`` for the seeded ``w`` (held: 2 workers)."""
    head = {"op": "push", "rank": rank, "step": step, "count": 1, "lr": 0.1, "params": [0]}
    head |= {"blocks": list(range(BLOCKS)), "versions": [0] * BLOCKS}
    h.send(head, [np.zeros((ROWS, 1))] * BLOCKS)


def _gather(h, rank: int, tag: str) -> None:
    h.send({"op": "gather", "rank": rank, "tag": tag, "value": None})


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "first, then, why",
    [
        (lambda h: _push_w(h, 1, 3), lambda h: _gather(h, 0, "barrier:5"), "needs its push"),
        (lambda h: _gather(h, 0, "barrier:5"), lambda h: _push_w(h, 1, 3), "needs its push"),
        (lambda h: h.send({"op": "bye", "rank": 1}), lambda h: _gather(h, 0, "barrier:5"), "bye"),
        (lambda h: _gather(h, 0, "barrier:5"), lambda h: h.send({"op": "bye", "rank": 1}), "bye"),
        (lambda h: _gather(h, 0, "barrier:5"), lambda h: _gather(h, 1, "allreduce:5"), "never"),
    ],
)
def test_either_order_of_arrival_fails_the_job_at_the_second(hand, first, then, why):
    h = hand(workers=2)
    h.seed()
    first(h)
    assert not h.shard.failed  # the first alone may still be answered
    then(h)
    assert h.shard.failed and why in h.shard.failed
    errors = [h.read()[0].get("error") for _ in range(2)]  # the bye's is answered as usual
    assert all(e == h.shard.failed for e in errors if e is not None) and any(errors)
    assert not h.shard.gathers_held and not h.shard.waiting


@pytest.mark.timeout(30)
def test_a_gather_every_rank_sent_is_answered_and_no_longer_held(hand):
    h = hand(workers=2)
    _gather(h, 0, "barrier:5")
    assert h.shard.gathers_held == {"gather:barrier:5"}
    _gather(h, 1, "barrier:5")
    assert [h.read()[0]["values"] for _ in range(2)] == [[None, None]] * 2
    assert not h.shard.gathers_held and not h.shard.waiting and not h.shard.failed


# -- the rule itself, on what a shard holds ---------------------------------------------------
def _held(**by_key):
    """A shard's ``waiting``: key -> {rank: header}."""
    return {
        key: _Waiting(key, 0.0, {r: (b"", header, None) for r, header in ranks.items()})
        for key, ranks in by_key.items()
    }


def _tag(tag):
    return {"tag": tag}


def _push(step):
    return {"step": step}


@pytest.mark.parametrize(
    "waiting, left, why",
    [
        ({"gather:allreduce:5": {0: _tag("allreduce:5")}, "gather:barrier:5": {1: _tag("barrier:5")}}, (), "never makes"),  # noqa: E501
        ({"gather:allreduce:5": {0: _tag("allreduce:5")}, "gather:allreduce:6": {1: _tag("allreduce:6")}}, (), "never makes"),  # noqa: E501
        ({"gather:barrier:4": {0: _tag("barrier:4")}, "push:3": {1: _push(7)}}, (), "needs its push"),  # noqa: E501
        ({"gather:barrier:4": {0: _tag("barrier:4")}}, (1,), "closed (bye)"),
    ],
)  # fmt: skip
def test_what_can_never_be_answered_is_named(waiting, left, why):
    message = stuck(_held(**waiting), live=[0, 1], left=left)
    assert message is not None and why in message and message.startswith(MISMATCH)


@pytest.mark.parametrize(
    "waiting, live, left",
    [
        ({}, [0, 1], ()),  # nothing held
        ({"push:3": {0: _push(7)}}, [0, 1], (1,)),  # a step waiting for a rank: the timeout's
        ({"gather:barrier:4": {0: _tag("barrier:4")}}, [0, 1], ()),  # rank 1 may still come
        ({"gather:barrier:4": {0: _tag("barrier:4"), 1: _tag("barrier:4")}}, [0, 1, 2], ()),  # noqa: E501
        # a push of the gathering rank itself (a step it gave up): no other rank is in a step
        ({"gather:barrier:4": {0: _tag("barrier:4")}, "push:3": {0: _push(7)}}, [0, 1], ()),
        # every live rank in the same gather: the shard answers it (async: rank 1 lost)
        ({"gather:barrier:4": {0: _tag("barrier:4")}}, [0], (1,)),
    ],
)  # fmt: skip
def test_what_may_still_be_answered_is_left_waiting(waiting, live, left):
    assert stuck(_held(**waiting), live=live, left=left) is None
