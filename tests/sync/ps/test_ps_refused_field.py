"""A shard's error reply that refuses the job says so in a field, ``"refused": "job"``, beside
its ``error``, and the worker raises JobRefused on that field alone: it decided by a regex on
the error's text, which a rewording on either side silently broke, and which an old
shard's words or a quote of them matched as well. Three places refuse the job: another job's
hello, a failure led by ranks that run different jobs (held requests and later ones), and
another job's id; other error replies, and a shard without the field, stay a plain SyncError.
A real shard (bound on 127.0.0.1) whose requests the test hands over one by one."""

from __future__ import annotations

import pytest
from test_ps_stuck import _bye, _gather, _hello_run, _push_w

from distconv.rank_endings import another_id_text
from distconv.sync import JobRefused, SyncError
from distconv.sync.ps.channel import shard_error
from distconv.sync.ps.job_hello import hello_fields


@pytest.mark.timeout(30)
def test_a_hello_of_another_job_and_the_gather_it_leaves_are_refused_as_a_job(hand):
    h = hand(workers=2)
    assert _hello_run(h, 0, 5)["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    refused = _hello_run(h, 1, 33, {"batch": 8})
    assert refused.get("refused") == "job", refused
    _bye(h, 1, run=33)
    waited = h.read()[0]  # rank 0's start-up gather, ended leading with the mismatch
    assert waited["error"].startswith("rank 1 and rank 0 run different jobs: "), waited
    assert waited.get("refused") == "job", waited


@pytest.mark.timeout(30)
def test_a_step_left_by_a_restart_of_another_job_is_refused_as_a_job(hand):
    h = hand(workers=2)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    h.seed()
    _push_w(h, 0, 1)  # held for rank 1's push of step 1
    assert _hello_run(h, 1, 33, {"batch": 8}).get("refused") == "job"
    _bye(h, 1, run=33)
    held = h.read()[0]
    assert "waits for its push" in held["error"] and held.get("refused") == "job", held


@pytest.mark.timeout(30)
def test_another_job_id_is_refused_as_a_job(hand):
    h = hand(workers=1)
    reply = h.ask({"op": "hello", "job": "job8", "host": "h", **hello_fields({})})[0]
    assert reply["error"] == another_id_text(0, "'job8'", "'local'"), reply
    assert reply.get("refused") == "job", reply


@pytest.mark.timeout(30)
def test_other_refusals_and_failures_are_no_refused_job(hand):
    """A hello refused for its host, and a failure led by a rank that closed on an error."""
    h = hand(workers=2)
    host = h.ask({"op": "hello", "rank": 1, "host": "h\n", **hello_fields({})})[0]
    assert host["op"] == "error" and "refused" not in host, host
    assert _hello_run(h, 0, 5)["op"] == "ok"
    assert _hello_run(h, 1, 11)["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    _bye(h, 1, run=11, error="RuntimeError: out of memory")
    failed = h.read()[0]
    assert failed["op"] == "error" and "refused" not in failed, failed


@pytest.mark.parametrize(
    "refused, raised", [("job", JobRefused), (None, SyncError), ("step", SyncError)]
)
def test_the_worker_reads_the_field_not_the_words(refused, raised):
    """The words alone (an older shard's reply, or a quote in another failure) are no
    refusal; the field alone is, whatever the text."""
    said = "rank 1 and rank 0 run different jobs: batch: 8 here, 9 there"
    assert type(shard_error(f"rank 0, hello: pserver x: {said}", refused)) is raised
    assert type(shard_error("rank 0, hello: pserver x: shard error: x", refused)) is raised
