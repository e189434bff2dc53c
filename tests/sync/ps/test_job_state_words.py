"""What a shard says of the job before once its workers said bye (``job_state.py``): a job
whose workers left on errors did not end as one that ran its epochs, and the shard's log must
not read as a clean end. A shard driven by hand, its requests real ZeroMQ messages."""

from __future__ import annotations

import logging

import pytest

from distconv.sync.ps.job_hello import hello_fields

#: what the next hello is told once the job before is over: bound afresh
AFRESH = "the next hello binds the job afresh"


def _hello(h, rank: int, run: int) -> dict:
    """The reply header to a hello of ``rank``'s worker of ``run``."""
    return h.ask({"op": "hello", "rank": rank, "run": run, "host": "h", **hello_fields({})})[0]


def _job_then_next_hello(h, caplog, errors: dict[int, str]) -> list[logging.LogRecord]:
    """Ranks 0 and 1 say hello, then bye (with ``errors[rank]`` where given); then rank 0 of
    the next job says hello, accepted. The shard's records about the job before."""
    assert [_hello(h, rank, run)["op"] for rank, run in ((0, 1), (1, 2))] == ["ok", "ok"]
    for rank, run in ((0, 1), (1, 2)):
        error = {"error": errors[rank]} if rank in errors else {}
        assert h.ask({"op": "bye", "rank": rank, "run": run, **error})[0]["op"] == "ok"
    caplog.clear()
    assert _hello(h, 0, 3)["op"] == "ok"
    return [r for r in caplog.records if "the job before ended" in r.getMessage()]


@pytest.mark.timeout(30)
def test_workers_that_left_on_errors_are_said_to_have_left_on_them(hand, caplog):
    """Before, the shard logged "the job before ended (its workers said bye)" at INFO, as for
    a job that ran its epochs: an operator read the failed start-up as a clean end."""
    caplog.set_level(logging.INFO, "distconv.pserver")
    h = hand(workers=2)
    error = "SyncError: rank 0: no answer to hello from pserver shard(s) 2 (10.0.0.7:5555)"
    (record,) = _job_then_next_hello(h, caplog, {0: error})
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        f'shard 0: the job before ended on errors (its workers said bye, rank 0 closed on "{error}"'
        f"): {AFRESH}"
    )


@pytest.mark.timeout(30)
def test_workers_that_all_left_cleanly_end_the_job_in_the_words_of_a_clean_end(hand, caplog):
    caplog.set_level(logging.INFO, "distconv.pserver")
    h = hand(workers=2)
    (record,) = _job_then_next_hello(h, caplog, {})
    assert record.levelno == logging.INFO
    assert record.getMessage() == f"shard 0: the job before ended (its workers said bye): {AFRESH}"
