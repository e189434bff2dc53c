"""A shard that fails the job on a rank silent past its ``--timeout`` names the way out, where it
knows nothing else of that rank (it may only be slow: a straggler): raise the shards'
``--timeout`` with the workers', true of shards started by hand and of ``distconv-launch``'s,
which take ``distconv train``'s and never a program of the user's. Its words named the rank and
the wait, and no option (the MPI watchdog's and the late job check's do). And the launcher reads
the rank back from a worker's quote of them (:func:`launcher.named_cause.told_rank`), one rank
only: where the shard names several (a link down), no one rank is blamed. So too the shards a
worker's words say never answered it (``no answer to ... from pserver shard(s) 0 (...)``), which
it blames where that shard never exited."""

from __future__ import annotations

import time

import pytest

from distconv.straggler_words import (
    CAME_BACK,
    NO_ANSWER_WHY,
    RAISE_TIMEOUT,
    seconds_text,
    unanswering_shards_in,
    unresolved_text,
)
from distconv.sync.ps.channel import GRACE
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.give_up_words import no_answer_text
from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.late_ranks import no_answer_words
from distconv.sync.ps.shard_timeouts import ShardTimeouts
from distconv.train_args import train_parser
from launcher.commands import ServerOptions, parse_program, server_command, train_timeout
from launcher.named_cause import told_rank, unanswered_shard

pytestmark = pytest.mark.timeout(60)


def _hello(h, rank: int) -> None:
    reply = h.ask({"op": "hello", "rank": rank, "host": "h", **hello_fields({}), "run": rank})
    assert reply[0]["op"] == "ok", reply


def _quoted(failed: str) -> list[str]:
    """A worker's last line, as ``distconv train`` says the shard's words it stopped on."""
    return [f"distconv train: error: rank 0, barrier:2: pserver 127.0.0.1:5: {failed}"]


def test_a_sync_step_a_rank_sent_nothing_for_names_the_way_out(hand):
    h = hand(workers=2, mode="sync", timeout=1.0)
    for rank in (0, 1):
        _hello(h, rank)
    h.send({"op": "gather", "rank": 0, "tag": "barrier:2", "value": None})
    h.shard.waiting["gather:barrier:2"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.failed == (
        "rank 1 (host h, no step since its hello) sent nothing for barrier:2 (a meeting "
        "of every rank) "
        f"within 1 s; {RAISE_TIMEOUT}"
    )
    assert told_rank(_quoted(h.shard.failed)) == 1


def test_an_async_rank_silent_past_the_timeout_names_the_way_out(hand):
    h = hand(workers=2, mode="async", on_worker_loss="fail", timeout=1.0)
    for rank in (0, 1):
        _hello(h, rank)
    h.shard.last_seen[1] -= 10
    h.shard._check_timeouts(time.monotonic())
    assert (
        h.shard.failed
        == f"rank 1 (host h, no step since its hello) silent for 1 s; {RAISE_TIMEOUT}"
    )
    assert told_rank(_quoted(h.shard.failed)) == 1


def _shard_flags(*program: str) -> list[str]:
    """The flags ``distconv-launch local`` starts a shard with, for workers running ``program``
    (what follows its ``--``)."""
    options = ServerOptions(1, 2, timeout=train_timeout(parse_program(program)))
    return server_command(0, 5, options)


def test_the_way_out_is_true_of_a_program_of_the_users_and_of_shards_started_by_hand():
    """``distconv-launch`` passes ``distconv train``'s ``--timeout`` to its shards, none of a
    program of the user's, whose shards keep their default: the words said to raise
    ``--timeout`` "(distconv train's, which distconv-launch passes to the shards)", which
    a user of a program of their own cannot, nor one who started the shards by hand."""
    flags = _shard_flags("--timeout", "7")
    assert flags[flags.index("--timeout") + 1] == "7"
    assert "--timeout" not in _shard_flags("python3", "job.py", "--timeout", "7")
    assert f"{ShardConfig(bind='h:5').timeout:g} s beside a program of your own" in RAISE_TIMEOUT
    assert "raise the shards' --timeout with the workers'" in RAISE_TIMEOUT  # by hand too


def test_ranks_silent_together_are_named_without_one_blamed(hand):
    h = hand(workers=3, mode="sync", timeout=1.0)
    for rank in (0, 1, 2):
        _hello(h, rank)
    h.send({"op": "gather", "rank": 0, "tag": "barrier:2", "value": None})
    h.shard.waiting["gather:barrier:2"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.failed.startswith(
        "rank 1 (host h, no step since its hello), rank 2 (host h, no step since its "
        "hello) sent nothing for "
    ), h.shard.failed
    assert told_rank(_quoted(h.shard.failed)) is None


def test_a_rank_the_shard_knows_more_of_is_no_straggler():
    """A rank that closed, or waits in another gather, is named with it: not a straggler."""
    said = "rank 1 (host h, last step 2) sent nothing for step 3 within 1 s (rank 1 closed)"
    assert told_rank(_quoted(said)) is None
    assert told_rank(_quoted(said.replace(" (rank 1 closed)", f"; {RAISE_TIMEOUT}"))) == 1


def test_an_async_shard_that_hears_no_rank_says_so_and_blames_none_alone(hand):
    """A link down (or every worker stopped): every rank is silent, and the shard said that of
    rank 0, the first it checked, whom the launcher then blamed."""
    h = hand(workers=2, mode="async", on_worker_loss="fail", timeout=1.0)
    for rank in (0, 1):
        _hello(h, rank)
    for rank in (0, 1):
        h.shard.last_seen[rank] -= 10
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.failed == (
        "no worker was heard from for 1 s (a network partition, or every worker stopped?): "
        "rank 0 (host h, no step since its hello), rank 1 (host h, no step since its hello)"
    )
    assert told_rank(_quoted(h.shard.failed)) is None


def test_the_shards_a_worker_gave_up_on_are_read_back_from_its_words():
    said = f"rank 0: {no_answer_words('step 3')}0 (127.0.0.1:5), 2 (h:6) within 1.5 s"
    line = f"distconv train: error: {said}"
    assert unanswering_shards_in(["epoch 1/2 ...", line]) == ([0, 2], said)
    assert unanswering_shards_in([said.replace(" within", ", soon within")]) is None
    assert unanswered_shard([line]) is None  # several shards: a link down, no one blamed
    assert unanswered_shard([said.replace(", 2 (h:6)", "")]) == (0, said.replace(", 2 (h:6)", ""))


def test_a_worker_says_its_wait_as_its_timeout_times_the_grace_and_is_still_read_back():
    """``within 15 s (1.5 x --timeout 10 s): ...``: the operator set 10 and reads 15; the
    words after it are no likelier cause, and the launcher still blames the shard."""
    said = no_answer_text(0, "step 3", "0 (127.0.0.1:5)", 15.0, 10.0)
    assert said.endswith(f"within 15 s (1.5 x --timeout 10 s): {NO_ANSWER_WHY}"), said
    assert unanswering_shards_in([f"distconv train: error: {said}"]) == ([0], said)
    hinted = no_answer_text(0, "step 3", "0 (h:5)", 15.0, 10.0, "; the connection's handshake")
    assert NO_ANSWER_WHY not in hinted and unanswering_shards_in([hinted]) is None


@pytest.mark.parametrize(
    "cause",
    [CAME_BACK, unresolved_text("nosuchhost.invalid", 0, "Name or service not known")],
    ids=["came-back", "unresolved"],
)
def test_a_cause_of_the_shards_own_still_blames_the_shard(cause):
    """A shard whose connection dropped and came back (it restarted), or whose name does not
    resolve, is the shard's doing, as a silence is: the launcher blames it all the same."""
    said = no_answer_text(0, "step 3", "0 (h:5)", 15.0, 10.0, cause)
    assert said.endswith(f"(1.5 x --timeout 10 s){cause}") and NO_ANSWER_WHY not in said, said
    assert unanswered_shard([f"distconv train: error: {said}"]) == (0, said)
    handshakes = "; the connection's handshake failed 3 time(s)"
    assert unanswering_shards_in([said + handshakes]) is None  # a likelier cause besides


def test_train_help_says_a_worker_waits_the_grace_times_its_timeout():
    """An operator who gave ``--timeout 10`` reads ``within 15 s``: the help says why."""
    (timeout,) = [a for a in train_parser()._actions if "--timeout" in a.option_strings]
    assert f"a worker waits {GRACE:g} x this for a shard's reply" in timeout.help


@pytest.mark.parametrize("timeout", [1e6, 12345678.9])
def test_a_worker_that_waits_a_million_seconds_or_more_is_still_read_back(timeout):
    """``:g`` said ``within 1.5e+06 s``, which the launcher did not read: it blamed the worker
    that exited first, not the shard the worker named."""
    said = no_answer_text(0, "step 3", "0 (127.0.0.1:5)", timeout * GRACE, timeout)
    assert f" within {seconds_text(timeout * GRACE)} s (1.5 x --timeout " in said, said
    assert "e+" not in said, said
    assert unanswered_shard([f"distconv train: error: {said}"]) == (0, said)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_shard_that_waits_a_million_seconds_or_more_is_still_read_back(hand, mode):
    """A shard's ``sent nothing for ... within 1e+06 s`` and ``silent for 1e+06 s`` were not
    read either: the straggler it named went unblamed."""
    h = hand(workers=2, mode=mode, on_worker_loss="fail", timeout=1e6)
    for rank in (0, 1):
        _hello(h, rank)
    if mode == "sync":
        h.send({"op": "gather", "rank": 0, "tag": "barrier:2", "value": None})
        h.shard.waiting["gather:barrier:2"].since -= 2e6
    else:
        h.shard.last_seen[1] -= 2e6
    h.shard._check_timeouts(time.monotonic())
    assert told_rank(_quoted(h.shard.failed)) == 1, h.shard.failed
    assert " 1000000 s; " in h.shard.failed, h.shard.failed


@pytest.mark.parametrize(
    "timeout, given", [(1e-5, "0.00001"), (1e16, "10000000000000000"), (0.1999999, "0.1999999")]
)
def test_a_workers_timeout_is_said_as_it_reads_back_without_an_exponent(timeout, given):
    """``(1.5 x --timeout 1e-05 s)`` beside ``within 0.000015 s``: one line, two forms."""
    said = no_answer_text(0, "step 3", "0 (127.0.0.1:5)", timeout * GRACE, timeout)
    assert f" (1.5 x --timeout {given} s): " in said and "e-" not in said and "e+" not in said
    assert float(given) == timeout and unanswered_shard([said]) == (0, said)


def test_seconds_are_said_in_six_digits_without_an_exponent():
    said = [seconds_text(s) for s in (15.0, 1.5e6, 0.29999985, 1e-5, 1851850.5, 1.5e16)]
    assert said == ["15", "1500000", "0.3", "0.00001", "1851850", "15000000000000000"]


class _OutwaitedWorker(ShardTimeouts):
    """A worker of two whose shard 0 waits 60 s for every worker, past the worker's 1.5 s."""

    timeout, rank, world_size, mode = 1.0, 0, 2, "sync"
    _shard_timeouts = {0: 60.0}


def test_a_shard_a_worker_says_outwaits_it_is_not_read_back():
    """A worker that gives up on a shard that waits longer for every worker says that a worker
    that never came is the likelier cause (a program of the user's whose ``timeout=`` the
    launcher cannot pass to the shards): that shard is healthy, and no shard is named."""
    hint = _OutwaitedWorker()._shorter_wait_hint([0], 1.5, "step 3")
    assert hint.startswith(" (shard(s) 0 wait up to 60 s for every worker"), hint
    said = f"rank 0: {no_answer_words('step 3')}0 (127.0.0.1:5) within 1.5 s"
    assert unanswering_shards_in([said]) == ([0], said)
    assert unanswering_shards_in([f"distconv train: error: {said}{hint}"]) is None
    assert unanswered_shard([f"{said}; the connection's handshake failed 3 time(s)"]) is None
