"""A worker started with another ``--job-id`` is refused alone: the ranks of this job waiting
for its rank (the start-up gather) heard nothing until the shard's ``--timeout``, then stopped
as on a peer's failure (exit 75), naming the timeout, as the shard never hears a worker of
another id close. They now hear at once that a worker of that rank was refused
as another job, as a refusal of the job (one line, exit 1). The id tells jobs apart, so a stray
of another job claiming a rank whose worker of this job is here stops nothing. The shard the
job's ``--job-id`` names is "this job". Real shards on 127.0.0.1 port 0: one served on a thread
under real worker processes (``run_main``), and one handed its requests one by one."""

from __future__ import annotations

import logging
import sys
import time

import pytest
import zmq
from ps_helpers import script_ranks, served
from test_ps_stuck import _bye, _gather, _hello_run, _meet, _push_w

from distconv.rank_endings import another_id_text
from distconv.sync.ps import keys as keyfiles
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.late_job_check import NOT_FAILED
from distconv.sync.ps.server import Shard
from distconv.sync.ps.wire import pack, unpack_header
from tests.other_jobs import OTHER_JOBS

#: the shard's --timeout: the waiting rank heard of the refusal only when it had waited it out
SHARD_TIMEOUT = 20.0
#: what the shard refuses a worker of job 'job8' with
REFUSAL = another_id_text(1, "'job8'", "'local'")
#: what the ranks waiting for rank 1 hear, leading
WAITERS = f"{REFUSAL}; no worker of this job "


@pytest.mark.timeout(60)
def test_the_rank_waiting_for_a_worker_of_another_job_id_stops_at_once(tmp_path):
    script = tmp_path / "jobs.py"  # rank 1 names another job (the batch sizes never meet)
    script.write_text(
        'import os\nif os.environ["RANK"] == "1":\n    os.environ["DISTCONV_JOB_ID"] = "job8"\n'
        + OTHER_JOBS
    )
    config = ShardConfig(bind="127.0.0.1:0", workers=2, insecure=True, timeout=SHARD_TIMEOUT)
    with served(Shard(config)) as shard:
        start = time.monotonic()
        ended = script_ranks(
            [sys.executable, str(script), str(tmp_path / "out")], shard.endpoint, 50
        )
        took = time.monotonic() - start
    lines = []
    for status, err in ended:
        assert status == 1 and "Traceback" not in err, err[-2000:]  # rank 0: 75 before
        (line,) = [x for x in err.splitlines() if x.startswith("jobs.py: error: ")]
        lines.append(line.partition(f"pserver {shard.endpoint}: ")[2])
    assert lines[1] == REFUSAL, lines  # the refused worker keeps its own refusal
    assert lines[0].startswith(WAITERS + "holds rank 1 here: rank 0 "), lines
    assert "waits in all_equal:1" in lines[0], lines
    assert took < SHARD_TIMEOUT, f"the ranks ended after {took:.1f} s: {lines}"


def _other_id_hello(h, rank: int = 1) -> dict:
    """A hello of ``rank`` naming job 'job8'; the reply to it (a failed gather's may come
    first on the one client socket: it is returned after, as the second header)."""
    h.send({"op": "hello", "job": "job8", "rank": rank, "host": "h", **hello_fields({})})
    replies = [h.read()[0]]
    while replies[-1]["id"] != h.next_id:
        replies.append(h.read()[0])
    refusal = another_id_text(rank, "'job8'", "'local'")
    assert replies[-1]["error"] == refusal and replies[-1].get("refused") == "job", replies
    return replies[:-1]


def _assert_refused_as_a_job(reply: dict) -> None:
    assert reply["op"] == "error" and reply["error"].startswith(WAITERS), reply
    assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply


@pytest.mark.timeout(30)
@pytest.mark.parametrize("refused_first", [False, True], ids=["waiting", "refused-first"])
def test_the_start_up_gather_is_failed_at_the_refusal_or_at_the_gather(hand, refused_first):
    h = hand(workers=2)
    if refused_first:
        assert _other_id_hello(h) == []  # nobody waits yet: nothing failed
    assert _hello_run(h, 0, 5)["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    if refused_first:
        assert h.client.poll(5000), "rank 0's gather is still held"
    failed = [h.read()[0]] if refused_first else _other_id_hello(h)
    (reply,) = failed
    _assert_refused_as_a_job(reply)
    assert "rank 0 (host h, no step since its hello) waits in all_equal:1" in reply["error"], reply


@pytest.mark.timeout(30)
def test_a_job_started_again_against_running_shards_hears_it_too(hand):
    """Both workers said bye; the job's new run waits in its start-up gather, and rank 1's new
    worker names another id: rank 1's latest worker of this job closed before the refusal."""
    h = hand(workers=2)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    for rank, run in ((0, 5), (1, 11)):
        _bye(h, rank, run=run)
    assert _hello_run(h, 0, 6)["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    (reply,) = _other_id_hello(h)
    _assert_refused_as_a_job(reply)


def _held_push(h) -> None:
    h.seed()
    _push_w(h, 0, 1)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "mode, hold, release",
    [
        ("sync", _held_push, lambda h: _push_w(h, 1, 1)),
        ("sync", lambda h: _gather(h, 0, "barrier:2"), lambda h: _gather(h, 1, "barrier:2")),
        ("async", lambda h: _gather(h, 0, "barrier:2"), lambda h: _gather(h, 1, "barrier:2")),
    ],
    ids=["sync-step", "sync-barrier", "async-barrier"],
)
def test_a_stray_of_another_id_stops_no_job_whose_rank_is_here(hand, mode, hold, release):
    """Rank 0 waits for rank 1, whose worker of this job is here (busy in its step); a stray
    of job 'job8' claims rank 1, another rank 7 (outside the count): the wait goes on, and
    rank 1's part answers it."""
    h = hand(workers=2, mode=mode)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    hold(h)
    assert _other_id_hello(h) == [] and _other_id_hello(h, 7) == []
    assert not h.shard.failed, h.shard.failed
    release(h)
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok"] * 2 and not h.shard.failed


@pytest.mark.timeout(30)
def test_a_worker_of_this_job_after_the_stray_takes_its_rank(hand):
    """The stray of another id came first; rank 1's worker of this job says hello after it:
    rank 0's start-up gather waits for it, and is answered. When rank 1 goes silent later,
    the timeout names no refusal: the stray came before rank 1's latest hello."""
    h = hand(workers=2, timeout=0.2)
    assert _other_id_hello(h) == []
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    assert not h.shard.failed, h.shard.failed
    _held_push(h)
    time.sleep(0.3)
    h.shard._check_timeouts(time.monotonic())
    assert "sent nothing" in h.shard.failed and "job id" not in h.shard.failed, h.shard.failed


@pytest.mark.timeout(30)
def test_a_push_held_from_a_run_before_waits_for_no_rank(hand):
    """Rank 0's push of its run before is held when rank 0 says hello again (the push is
    answered then: that hello ends the run) and rank 1 says bye; a stray of another id then
    claims rank 1: nothing of rank 0's new run waits for it, so nothing stops."""
    h = hand(workers=2)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    _held_push(h)
    dropped = _hello_run(h, 0, 6)  # the held push's answer comes before the hello's
    assert "rank 0 started again" in dropped["error"], dropped
    assert h.read()[0]["op"] == "ok"
    _bye(h, 1, run=11)
    _other_id_hello(h)
    assert not h.shard.failed, h.shard.failed


@pytest.mark.timeout(30)
def test_a_silent_rank_claimed_by_another_id_is_named_at_the_timeout(hand):
    """Rank 1's worker of this job went silent in step 1 and a worker of another id claimed
    rank 1: the shard cannot tell the first from one busy in its step, so the timeout decides,
    and its message says what the shard saw."""
    h = hand(workers=2, timeout=0.2)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    _held_push(h)
    assert _other_id_hello(h) == []
    time.sleep(0.3)
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.failed.endswith(f"(a worker of {REFUSAL})"), h.shard.failed
    assert h.shard.failed_ranks == [1], h.shard.failed_ranks  # silent: its failure, as before


@pytest.mark.timeout(30)
def test_a_refusal_from_before_the_run_is_not_named_at_the_timeout(hand):
    """A stray of another id claimed rank 1 longer than ``--timeout`` before rank 0's start-up
    gather began, and rank 1's worker of this job never says hello: the timeout named the
    stray's refusal as if it explained the silent rank; a refusal that old is of
    no run starting now, so the timeout names rank 1 as silent alone, and late (rank 0 is
    told so, and says hello again: nothing fails)."""
    h = hand(workers=2, timeout=0.2)
    assert _other_id_hello(h) == []
    time.sleep(0.3)
    assert _hello_run(h, 0, 5)["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    time.sleep(0.3)
    h.shard._check_timeouts(time.monotonic())
    silent = "rank 1 (which never said hello) sent nothing for all_equal:1"
    told = h.read()[0]
    assert told["error"] == f"{silent} (setup's job check) within 0.2 s; {NOT_FAILED}", told
    assert told["failed_ranks"] == [1] and told["late"] == [1], told
    assert h.shard.failed is None, h.shard.failed


@pytest.mark.timeout(30)
def test_a_worker_of_another_id_is_logged_once(hand, caplog):
    """Its hello is refused, and so is the bye it closes with: the shard logged each as a
    bad request, two warnings a worker; the hello's alone now."""
    h = hand(workers=2)
    with caplog.at_level(logging.WARNING, logger="distconv.pserver"):
        _other_id_hello(h)
        reply = h.ask({"op": "bye", "job": "job8", "rank": 1})[0]
    assert reply["error"] == REFUSAL and reply.get("refused") == "job", reply
    warned = [r.getMessage() for r in caplog.records if "bad request" in r.getMessage()]
    assert len(warned) == 1 and warned[0].endswith(REFUSAL), warned


@pytest.mark.timeout(30)
@pytest.mark.parametrize("runs_before", [0, 1], ids=["first-run", "between-runs"])
def test_a_refusal_older_than_the_timeout_stops_no_later_run(hand, runs_before):
    """A stray of another id claimed rank 1 while no run of this job was on the shard (before
    its first, or between two runs of shards kept running), longer than ``--timeout`` before
    this job's ranks came: it stopped the job at rank 0's start-up gather, before rank 1's
    worker of this job could say hello, and the shard stayed failed. It is no
    worker of this run's start (its ranks start within the timeout of each other)."""
    h = hand(workers=2, timeout=0.2)
    for _ in range(runs_before):
        for rank, run in ((0, 3), (1, 9)):
            assert _hello_run(h, rank, run)["op"] == "ok"
        _meet(h)
        for rank, run in ((0, 3), (1, 9)):
            _bye(h, rank, run=run)
    assert _other_id_hello(h) == []
    time.sleep(0.3)
    assert _hello_run(h, 0, 5)["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    assert not h.shard.failed, h.shard.failed
    assert _hello_run(h, 1, 11)["op"] == "ok"
    _gather(h, 1, "all_equal:1")
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok"] * 2 and not h.shard.failed


@pytest.mark.timeout(30)
def test_a_key_of_this_job_claiming_another_rank_under_another_id_stops_nothing(job_keys):
    """Secure: rank 0's key sends a hello of job 'job8' for rank 1 while rank 0 waits in its
    start-up gather. The shard took it as rank 1's refusal before it looked at the key, and
    failed the job as a refusal of it; it is refused for the key, claiming no
    rank, and rank 0's gather waits on."""
    config = ShardConfig(bind="127.0.0.1:0", workers=2, keys_dir=job_keys, timeout=SHARD_TIMEOUT)
    with served(Shard(config)) as shard, zmq.Context() as ctx:
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        keyfiles.curve_client(sock, keyfiles.worker_keys(job_keys, 0))
        sock.connect(f"tcp://{shard.endpoint}")
        hello = {"op": "hello", "host": "h", **hello_fields({}), "run": 5}
        asked = [
            {**hello, "id": 1, "job": "local", "rank": 0},
            {"op": "gather", "id": 2, "job": "local", "rank": 0, "tag": "all_equal:1"},
            {**hello, "id": 3, "job": "job8", "rank": 1},
        ]
        for head in asked:
            sock.send_multipart(pack({**head, "value": None} if head["id"] == 2 else head))
        replies = []
        while not replies or replies[-1]["id"] != 3:
            assert sock.poll(10_000), replies
            replies.append(unpack_header(sock.recv_multipart()[0], request=False))
        assert [r["id"] for r in replies] == [1, 3] and replies[0]["op"] == "ok", replies
        assert "another worker's key" in replies[1]["error"], replies
        assert not shard.failed, shard.failed
        sock.close(0)
