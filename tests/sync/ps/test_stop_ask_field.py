"""The pieces of a draining shard's ask that its workers stop (``stop_asked``,
:mod:`distconv.sync.ps.stop_asked`): which replies carry it, which values a worker takes, and
how the ranks' stop agreement reads it (the whole job, shard and workers as processes:
``test_shard_asks_stop.py``)."""

from __future__ import annotations

import signal

import pytest
from test_ps_drain import bare_shard

from distconv.optim import SGD
from distconv.stop_agreement import _agreed, _shard_ask, stop_agreed
from distconv.stop_request import StopRequest
from distconv.sync.local import LocalSync
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard
from distconv.sync.ps.stop_asked import STOP_ASKED, asking_shard


def test_a_shard_asks_for_the_stop_only_while_it_drains_and_the_job_goes_on():
    shard = Shard(ShardConfig(bind="127.0.0.1:0", insecure=True, shard=2, num_shards=3))
    try:
        assert shard.stop_ask_fields() == {}  # serving: no ask
        shard.drain()
        assert shard.stop_ask_fields() == {STOP_ASKED: 2}
        shard._fail("rank 1 sent nothing", ranks=[1])
        assert shard.stop_ask_fields() == {}  # failed: its error replies say why instead
    finally:
        shard.close()


def test_a_shard_that_failed_the_job_on_its_own_stop_asks_no_more():
    shard = bare_shard(accepted_at={0: 1}, last_step={0: 10})
    try:
        assert shard.stop_ask_fields() == {STOP_ASKED: 0}
        assert not shard.drained(shard._drain_until)  # its drain ran out, rank 0 still in
        assert shard.failed is not None and shard.stop_ask_fields() == {}
    finally:
        shard.close()


@pytest.mark.parametrize(
    ("field", "shard"), [(0, 0), (3, 3), (-1, None), ("1", None), (True, None), (None, None)]
)
def test_a_worker_takes_only_a_shards_index_as_an_ask(field, shard):
    """Another service's field, or a malformed one, asks nothing: a stop asked by mistake
    would cost the job a restart."""
    header = {"op": "ok", "id": 1} if field is None else {"op": "ok", "id": 1, STOP_ASKED: field}
    assert asking_shard(header) == shard


def test_one_rank_asked_by_a_shard_stops_by_sigterm_naming_it():
    sync = LocalSync(SGD(0.1))
    sync.stop_asked_by_shard = 1  # as a reply of shard 1 leaves it on a parameter-server sync
    stop = StopRequest(announce=False)
    agreed = stop_agreed(sync, stop, step=3)
    assert agreed is not None and agreed.signal == signal.SIGTERM
    assert agreed.said(3) == "stopped after step 3: pserver shard 1 got SIGTERM"
    assert stop.answered and sync.stop_asked_by_shard is None  # a later fit starts unasked


def test_no_ask_and_no_signal_goes_on():
    sync = LocalSync(SGD(0.1))
    assert stop_agreed(sync, StopRequest(announce=False), step=3) is None


def summed(*parts: list[float]) -> list[float]:
    """The ranks' ``parts`` as the stop agreement's sum makes them one."""
    return [sum(column) for column in zip(*parts)]


def test_the_ranks_name_the_shard_that_asked_where_those_that_read_an_ask_agree():
    none = [0.0, 0.0]
    same = summed(_shard_ask(1), _shard_ask(1), _shard_ask(None))
    assert _agreed(none, none, none, same).said(8) == (
        "stopped after step 8: pserver shard 1 got SIGTERM"
    )
    # shards 0 and 2 both asked: their mean is shard 1's, which did not: none is named
    apart = summed(_shard_ask(0), _shard_ask(2))
    assert _agreed(none, none, none, apart).said(8) == (
        "stopped after step 8: a pserver shard got SIGTERM"
    )


def test_a_shards_ask_wins_over_ctrl_c_and_a_ranks_own_sigterm_is_still_said():
    asked = _shard_ask(0)
    interrupted = _agreed([0.0, 1.0], [0.0, 1.0], [0.0, 0.0], asked)
    assert interrupted.signal == signal.SIGTERM  # the job exits 143, as the shard's stop
    own = _agreed([1.0, 0.0], [1.0, 0.0], [0.0, 0.0], asked)
    assert own.said(8) == "stopped by SIGTERM after step 8"
    other = _agreed([0.0, 0.0], [1.0, 0.0], [1.0, 0.0], asked)
    assert other.said(8) == "stopped after step 8: rank 1 got SIGTERM"
