"""A worker that stops because another rank failed says so: the shard's error reply names the
ranks whose failure failed the job (``failed_ranks``), the client raises :class:`PeerFailed`
for it, and ``distconv train`` exits 75 (the launcher then reports the rank that failed, not
the victim that often exits first: ``tests/launcher/test_launch_peer_failed.py``)."""

from __future__ import annotations

import contextlib
import time

import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps
from test_ps_stuck import _bye, _gather, _hello, _hello_run, _push_w

from distconv import cli
from distconv.rank_endings import different_jobs_text, setup_failure_text
from distconv.sync.base import SyncError
from distconv.sync.errors import JobRefused, job_refusal, setup_failure_description
from distconv.sync.peers import PEER_FAILED_STATUS, PeerFailed, failed_peers, peer_failure
from tests.setup_failures import told_by_a_shard

TIMEOUT = 120


class Boom(RuntimeError):
    pass


# -- the shard's reply -----------------------------------------------------------------------
def _started(hand, **config):
    h = hand(workers=2, **config)
    for rank in (0, 1):
        _hello(h, rank)
    h.seed()
    return h


@pytest.mark.timeout(30)
def test_a_step_failed_by_a_rank_that_closed_on_an_error_names_it(hand):
    h = _started(hand)
    _bye(h, 1, error="MemoryError: out of memory in layer fc1")
    _push_w(h, 0, 1)
    header, _ = h.read()
    assert header["op"] == "error" and header["failed_ranks"] == [1], header
    assert 'closed on "MemoryError: out of memory' in header["error"]
    # every later request of the failed job is refused with the same field
    later, _ = h.ask({"op": "gather", "rank": 0, "tag": "barrier:2", "value": None})
    assert later["op"] == "error" and later["failed_ranks"] == [1], later


@pytest.mark.timeout(30)
def test_a_rank_that_closed_without_an_error_failed_nothing(hand):
    """Fewer steps than the others (the ranks' data or epochs differ): a job that does not
    fit together, not a rank's failure."""
    h = _started(hand)
    _bye(h, 1)
    _push_w(h, 0, 1)
    header, _ = h.read()
    assert header["op"] == "error" and "failed_ranks" not in header, header


@pytest.mark.timeout(30)
def test_a_collective_left_by_a_rank_closed_on_an_error_names_it(hand):
    h = _started(hand)
    _gather(h, 0, "barrier:5")
    _bye(h, 1, error="Boom: in evaluation")
    header, _ = h.read()
    assert header["op"] == "error" and header["failed_ranks"] == [1], header


@pytest.mark.timeout(30)
def test_ranks_in_different_collectives_name_no_failed_rank(hand):
    """Ranks that disagree on what comes next run different programs: nobody failed first."""
    h = _started(hand)
    _gather(h, 0, "barrier:5")
    _gather(h, 1, "allreduce:5")
    replies = [h.read()[0] for _ in range(2)]
    assert all(r["op"] == "error" and "failed_ranks" not in r for r in replies), replies


@pytest.mark.timeout(30)
def test_a_rank_silent_for_the_timeout_is_named(hand):
    h = _started(hand, timeout=1.0)
    _push_w(h, 0, 1)
    h.shard._check_timeouts(time.monotonic() + 2.0)
    header, _ = h.read()
    assert header["op"] == "error" and header["failed_ranks"] == [1], header
    assert "rank 1 (host" in header["error"] and "sent nothing" in header["error"]


# -- the client ------------------------------------------------------------------------------
def test_which_failed_ranks_are_a_peers():
    assert failed_peers([1], 0) == (1,)
    assert failed_peers([1, 2], 0) == (1, 2)
    assert failed_peers([0, 1], 0) == ()  # this rank's own silence: not a peer's failure
    assert failed_peers(None, 0) == ()  # an older shard, or no rank to blame
    assert (
        failed_peers([], 0) == () and failed_peers("1", 0) == () and failed_peers([True], 0) == ()
    )


@contextlib.contextmanager
def _worker(endpoints, rank: int):
    net, sync = small_net(), insecure_worker(endpoints, rank, 2, timeout=TIMEOUT)
    try:
        sync.setup(net.parameters(), {"batch": 8})
        yield net, sync
    finally:
        sync.close()  # the bye carries an error propagating, as distconv.job's does


def _job(endpoints, raises: bool) -> BaseException | None:
    """Rank 1 trains 2 steps, then raises (``raises``) or just closes; rank 0 trains 5.
    Returns what rank 0 raised."""
    data = batches(5, 8)
    said: list = [None, None]

    def run(rank):
        try:
            with _worker(endpoints, rank) as (net, sync):
                train_steps(net, sync, data[: 2 if rank else 5], rank, 2)
                if rank == 1 and raises:
                    raise Boom("out of memory in layer fc1")
        except (SyncError, Boom) as exc:
            said[rank] = exc

    run_ranks(run, 2, timeout=60)
    return said[0]


@pytest.mark.timeout(60)
def test_the_rank_left_waiting_raises_peer_failed_naming_the_rank(shards):
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    error = _job(endpoints, raises=True)
    assert isinstance(error, PeerFailed) and error.ranks == (1,), repr(error)
    assert 'closed on "Boom: out of memory in layer fc1"' in str(error)


@pytest.mark.timeout(60)
def test_a_rank_that_closed_after_fewer_steps_is_no_peer_failure(shards):
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    error = _job(endpoints, raises=False)
    assert isinstance(error, SyncError) and not isinstance(error, PeerFailed), repr(error)


# -- distconv train's exit status ------------------------------------------------------------
@pytest.mark.parametrize(
    "error, status",
    [
        (PeerFailed("rank 0, step 6: pserver x: rank 1 closed on ...", [1]), PEER_FAILED_STATUS),
        (SyncError("rank 0 and rank 1 run different jobs: batch"), 1),
        (SyncError("rank 0: no answer to step 3 from pserver shard(s) 0 within 90 s"), 1),
        # a shard's word that another rank could not set up (fail_setup): that rank's victim
        (told_by_a_shard(1, 0), 75),
        # a script's own refusal in the same words: its own failure, no victim's
        (JobRefused(str(told_by_a_shard(1, 0))), 1),
        (JobRefused(f"rank 1: {different_jobs_text(1, 0, 'batch_size')}"), 1),
    ],
)
@pytest.mark.parametrize("debug", [False, True])
def test_distconv_train_exits_75_when_a_peer_failed(monkeypatch, capsys, error, status, debug):
    def handler(args):
        raise error

    monkeypatch.setattr(cli, "run_train", handler)
    if debug:
        monkeypatch.setenv("DISTCONV_DEBUG", "1")
    else:
        monkeypatch.delenv("DISTCONV_DEBUG", raising=False)
    if debug and status == 1:  # the traceback, as before
        with pytest.raises(SyncError):
            cli._main(["train", "--data", "synthetic"])
        return
    assert cli._main(["train", "--data", "synthetic"]) == status
    err = capsys.readouterr().err
    assert str(error) in err
    assert ("Traceback" in err) == debug


def test_a_peer_failure_raised_from_is_still_one():
    try:
        try:
            raise PeerFailed("rank 1 closed on ...", [1])
        except PeerFailed as exc:
            raise RuntimeError("the step failed") from exc
    except RuntimeError as exc:
        assert peer_failure(exc) is exc.__cause__
    assert peer_failure(SyncError("x")) is None and peer_failure(None) is None


def test_the_launcher_and_distconv_agree_on_the_status():
    from launcher.failure import PEER_FAILED_STATUS as LAUNCHER_STATUS

    assert LAUNCHER_STATUS == PEER_FAILED_STATUS == 75


# -- who is to blame: not a clean close, not another job, not a victim's own bye -------------
@pytest.mark.timeout(30)
def test_a_rank_refused_as_another_job_is_no_failed_rank(hand):
    """Rank 1's hello runs another job: it closes on that error, and the start-up gather rank
    0 waits in fails; the ranks' jobs do not fit, no rank failed (``docs/protocol.md``)."""
    h = hand(workers=2)
    assert _hello_run(h, 0, 5)["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    refused = _hello_run(h, 1, 33, {"batch": 8})
    assert "run different jobs" in refused["error"], refused
    _bye(h, 1, run=33, error=f"SyncError: rank 1, hello: pserver x: {refused['error']}")
    header, _ = h.read()
    assert header["op"] == "error" and "failed_ranks" not in header, header


@pytest.mark.timeout(30)
def test_a_rank_that_closed_cleanly_is_not_named_at_the_timeout(hand):
    """Rank 1 closed without an error where the shard cannot tell at once that the gather
    cannot complete (its bye may be of the run before): the timeout fails the job, and names
    no rank, as for a clean close read at once."""
    h = hand(workers=2, timeout=1.0)
    _hello(h, 1)
    _hello(h, 0)
    h.seed()
    _bye(h, 1)
    _gather(h, 0, "barrier:5")
    h.shard._check_timeouts(time.monotonic() + 2.0)
    header, _ = h.read()
    assert header["op"] == "error" and "(rank 1 closed)" in header["error"], header
    assert "failed_ranks" not in header, header


@pytest.mark.timeout(30)
def test_a_victims_bye_names_the_rank_it_stopped_for_not_itself(hand):
    """Shard A's timeout named rank 1 and rank 0 stopped (PeerFailed): its bye reaches shard
    B, where rank 1, back, waits for rank 0's push. B names rank 1, not rank 0: else rank 1
    would exit 75 too, and the launcher would report a victim."""
    h = _started(hand)
    _push_w(h, 1, 1)
    said = "PeerFailed: rank 0, step 1: pserver A: rank 1 (host h) sent nothing within 1 s"
    _bye(h, 0, error=said, failed_ranks=[1])
    header, _ = h.read()
    assert header["op"] == "error" and header["failed_ranks"] == [1], header
    assert failed_peers(header["failed_ranks"], 1) == ()  # rank 1's own: exit 1


def test_a_worker_closing_on_peer_failed_names_those_ranks_in_its_bye():
    from distconv.sync.ps.channel import ShardChannel

    sent: list = []
    channel = ShardChannel.__new__(ShardChannel)
    channel._socks = [None, None]
    channel._send = lambda shard, header, **_: sent.append((shard, header))
    try:
        raise PeerFailed("rank 0, step 1: pserver A: rank 1 ...", [1])
    except PeerFailed:
        channel._say_bye()
    assert [s for s, _ in sent] == [0, 1]
    assert all(h["failed_ranks"] == [1] and "PeerFailed" in h["error"] for _, h in sent), sent
    sent.clear()
    try:
        raise Boom("out of memory")
    except Boom:
        channel._say_bye()
    assert [s for s, _ in sent] == [0, 1], sent  # both said bye, naming no peer
    assert all("failed_ranks" not in h and "Boom" in h["error"] for _, h in sent), sent


def test_distconv_train_given_its_rank_by_flag_is_no_victim_of_its_own_failure(monkeypatch):
    """``--rank 0`` names this worker's rank where no ``RANK`` does: the job check's word that
    rank 0 could not set up is its own failure, exit 1, not another's (exit 75)."""
    raised = []

    def handler(args):
        raise raised[-1]

    monkeypatch.setattr(cli, "run_train", handler)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("DISTCONV_DEBUG", raising=False)
    failed = setup_failure_description(0, "CheckpointError: none")
    raised.append(job_refusal(1, 0, {"name": "mlp"}, failed, "name"))
    assert str(raised[-1]) == setup_failure_text(0, "CheckpointError: none")
    assert cli._main(["train", "--data", "synthetic", "--rank", "0"]) == 1
    assert cli._main(["train", "--data", "synthetic", "--rank", "1"]) == PEER_FAILED_STATUS
    raised.append(JobRefused(str(raised[-1])))  # a script's own, in the same words
    assert cli._main(["train", "--data", "synthetic", "--rank", "1"]) == 1
