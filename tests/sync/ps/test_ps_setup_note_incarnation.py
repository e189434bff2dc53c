"""A failure note tells only the workers of its own start of the job (its ``incarnation``:
the launch and restart count ``distconv-launch`` gives each child, carried in every hello).

Against shards that outlive the workers' restarts (started by hand, named by the scripts of a
``--servers 0`` launch), a note of restart 0 stood on where the rank it was to tell had been
stopped before its job check, and refused that rank's worker of restart 1 at its first job
check, before the noted rank's worker of restart 1 (which sets up) said hello: one needless
restart, or the job's end where none was left. A note of the same restart still tells a slow
rank that says hello after it (else it waits out ``--timeout``), and a hello without the field,
or of another launch, is told as before. A timeout of restart 1 that waited for the noted rank
quoted the note of restart 0, dropped as stale, blaming the rank's worker of restart 1 with its
words. In-process shard on 127.0.0.1, requests by hand; the
launch's own test runs real processes."""

from __future__ import annotations

import os
import time

import pytest
from ps_helpers import served
from test_ps_hello_description import GOOD
from test_ps_note_timeout_words import _wait_past_timeout
from test_ps_setup_note import NOTE, TOLD

from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.incarnations import incarnation_field
from distconv.sync.ps.late_job_check import NOT_FAILED
from distconv.sync.ps.losses import CHIEF_LOST
from distconv.sync.ps.server import Shard
from tests.held_lock import ASK_FOR_THE_LOCK, held_until_asked
from tests.launcher.launch_cli import launch
from tests.other_jobs import SMALL_NET

pytestmark = pytest.mark.timeout(60)

LAUNCH = "0123456789abcdef"  #: a launch token, as ``new_launch`` makes them
OTHER = "fedcba9876543210"  #: another launch's


def _hello(h, rank: int, run: int, job: dict, incarnation: list | None) -> dict:
    head = {"op": "hello", "rank": rank, "run": run, "host": "h", **job}
    return h.ask(head if incarnation is None else {**head, "incarnation": incarnation})[0]


def _gather(h, rank: int) -> dict | None:
    return h.answer({"op": "gather", "rank": rank, "tag": "all_equal:1", "value": "d"})


def _noted(h, incarnation: list | None) -> None:
    """Rank 0's note (of ``incarnation``) and the bye after it."""
    assert _hello(h, 0, 10, NOTE, incarnation)["error"] == TOLD
    assert h.ask({"op": "bye", "rank": 0, "run": 10})[0]["op"] == "ok"


@pytest.mark.parametrize("said", [True, False], ids=["rank-1-said-hello", "rank-1-silent"])
def test_a_note_of_the_start_before_refuses_no_job_check_of_the_next(hand, said):
    """Restart 0: rank 0's fit fails before setup (its note); rank 1's worker, before its job
    check, is stopped by the launcher. Restart 1: rank 1's worker is first in the job check,
    and waits there for rank 0's worker of restart 1, which sets up: the two meet."""
    h = hand(workers=2)
    if said:
        assert _hello(h, 1, 11, GOOD, [LAUNCH, 0])["op"] == "ok"
    _noted(h, [LAUNCH, 0])
    assert _hello(h, 1, 21, GOOD, [LAUNCH, 1])["op"] == "ok"
    assert _gather(h, 1) is None  # it waits, not refused with the note of restart 0
    assert not h.shard.setup_notes  # dropped at the first hello of restart 1
    assert _hello(h, 0, 20, GOOD, [LAUNCH, 1])["op"] == "ok"
    h.send({"op": "gather", "rank": 0, "tag": "all_equal:1", "value": "d"})
    replies = [h.read()[0] for _ in range(2)]
    assert [r["op"] for r in replies] == ["ok", "ok"], replies
    assert all(r["values"] == ["d", "d"] for r in replies), replies


@pytest.mark.parametrize("held", [True, False], ids=["held", "gathering-after"])
@pytest.mark.parametrize("before", [True, False], ids=["seen-at-restart-0", "first-hello"])
def test_a_note_tells_a_slow_rank_of_its_own_start(hand, held, before):
    """Restart 1: rank 0's worker fails before setup again; rank 1's worker of restart 1 (its
    hello of restart 0 seen, or none) is told in its job check, held when the note comes or
    made after it: it never waits for the timeout."""
    h = hand(workers=2)
    if before:
        assert _hello(h, 1, 11, GOOD, [LAUNCH, 0])["op"] == "ok"
    if held:
        assert _hello(h, 1, 21, GOOD, [LAUNCH, 1])["op"] == "ok"
        assert _gather(h, 1) is None
        h.send(
            {"op": "hello", "rank": 0, "run": 20, "host": "h", **NOTE, "incarnation": [LAUNCH, 1]}
        )
        told, note = h.read()[0], h.read()[0]  # the gather dismissed first, then the hello
        assert note["error"] == TOLD
    else:
        _noted(h, [LAUNCH, 1])
        assert _hello(h, 1, 21, GOOD, [LAUNCH, 1])["op"] == "ok"
        told = _gather(h, 1)
    assert told["error"] == TOLD and told["refused"] == "job", told


@pytest.mark.parametrize("restart", [0, 1], ids=["note-of-restart-0", "note-of-restart-1"])
def test_a_timeout_of_restart_1_says_only_a_note_of_its_own_start(hand, restart):
    """Restart 1: rank 1's worker waits in its job check (told first of a note of restart 1),
    and rank 0's worker never says hello (slow or stuck on its host). The timeout blames rank
    0, with the note's words where the note is of restart 1; one of restart 0, dropped as stale
    at restart 1's first hello, is not quoted: it blamed rank 0's worker of restart 1, which may
    well set up, with the error of the worker before."""
    h = hand(workers=2, timeout=0.5)
    if restart == 0:
        _noted(h, [LAUNCH, 0])
    assert _hello(h, 1, 21, GOOD, [LAUNCH, 1])["op"] == "ok"
    if restart == 1:
        _noted(h, [LAUNCH, 1])
        assert _gather(h, 1)["error"] == TOLD
        assert _hello(h, 1, 21, GOOD, [LAUNCH, 1])["op"] == "ok"  # fits again
    assert _gather(h, 1) is None
    time.sleep(0.6)  # past the gather's timeout
    h.shard._check_timeouts(time.monotonic())
    reply = h.read()[0]
    late = (
        "rank 0 (host h, no step since its hello) sent nothing for all_equal:1 (setup's job check)"
    )
    # a note that stands is rank 0's error: the job fails; without one rank 0 is only late
    words = f" ({TOLD})" if restart == 1 else f"; {NOT_FAILED}"
    assert reply["failed_ranks"] == [0], reply
    assert reply["error"] == f"{late} within 0.5 s{words}", reply
    assert (h.shard.failed is None) == (restart == 0), h.shard.failed


def test_a_continue_timeout_of_restart_1_losing_rank_0_says_no_note_of_restart_0(hand):
    """Async, ``--on-worker-loss continue``: at restart 0 both ranks met (rank 0 joined), then
    rank 0's next fit failed before setup. At restart 1 rank 1 waits in its job check and rank
    0's worker never says hello: the timeout loses rank 0, which fails the job as a chief
    that went silent (raise ``--timeout`` if it was only slow), not with restart 0's note."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=0.5)
    assert _hello(h, 0, 10, GOOD, [LAUNCH, 0])["op"] == "ok"
    assert _hello(h, 1, 11, GOOD, [LAUNCH, 0])["op"] == "ok"
    assert _gather(h, 0) is None
    assert _gather(h, 1)["values"] == ["d", "d"] and h.read()[0]["values"] == ["d", "d"]
    _noted(h, [LAUNCH, 0])
    assert _hello(h, 1, 21, GOOD, [LAUNCH, 1])["op"] == "ok"
    assert _gather(h, 1) is None
    _wait_past_timeout(h, 1, 21)
    reply = h.read()[0]
    late = (
        "rank 0 (host h, no step since its hello) sent nothing for all_equal:1 (setup's job check)"
    )
    assert reply["failed_ranks"] == [0], reply
    assert reply["error"] == f"{late} within 0.5 s: {CHIEF_LOST}", reply


@pytest.mark.parametrize(
    "noted, hello",
    [
        (None, [LAUNCH, 1]),
        ([LAUNCH, 0], None),
        ([LAUNCH, 0], [OTHER, 1]),
        (None, None),
    ],
    ids=["note-without", "hello-without", "other-launch", "neither"],
)
def test_a_note_and_a_hello_not_known_to_be_two_starts_tell_as_before(hand, noted, hello):
    """A note or a hello without an incarnation (a worker started by hand, an older distconv),
    or the two of two launches (one per rank, or the job launched again), whose restart counts
    say nothing of each other: the rank is told, as before the field."""
    h = hand(workers=2)
    _noted(h, noted)
    assert _hello(h, 1, 21, GOOD, hello)["op"] == "ok"
    told = _gather(h, 1)
    assert told["error"] == TOLD and told["refused"] == "job", told


@pytest.mark.parametrize(
    "bad",
    [-1, 1, "1", True, 1.5, [LAUNCH], [LAUNCH, -1], [LAUNCH, True], [LAUNCH, 1.0],
     [LAUNCH, "1"], [1, 2], ["", 1], ["a\nb", 1], ["x" * 65, 1], [LAUNCH, 1, 2], {"a": 1}],
)  # fmt: skip
def test_a_malformed_incarnation_is_a_malformed_hello(hand, bad):
    """An incarnation that is not ``[launch, restart]`` (a token, an integer >= 0) refuses the
    hello, as a malformed field, before anything of it is taken (one that is no list as every
    mistyped field is); a good hello follows."""
    h = hand(workers=2)
    reply = _hello(h, 1, 11, GOOD, bad)
    said = "hello: incarnation " if type(bad) is list else "header field 'incarnation' has type "
    assert reply["op"] == "error" and reply["error"].startswith(said), reply
    assert "refused" not in reply and 1 not in h.shard.accepted_at
    assert h.shard.job is None and 1 not in h.shard.incarnations
    reply = _hello(h, 1, 11, GOOD, [LAUNCH, 0])
    assert reply["op"] == "ok" and h.shard.incarnations[1] == (LAUNCH, 0), reply


def test_a_worker_says_its_launch_and_restart():
    """A worker's hello carries ``DISTCONV_LAUNCH`` and ``DISTCONV_RESTART`` (0 unset); none
    without a launch, or where the count is no count."""
    env = {"DISTCONV_LAUNCH": LAUNCH, "DISTCONV_RESTART": "3"}
    assert incarnation_field(env) == {"incarnation": [LAUNCH, 3]}
    assert incarnation_field({"DISTCONV_LAUNCH": LAUNCH}) == {"incarnation": [LAUNCH, 0]}
    assert incarnation_field({"DISTCONV_RESTART": "3"}) == {}
    assert incarnation_field({**env, "DISTCONV_RESTART": "-1"}) == {}


#: ``python SCRIPT ENDPOINT OUT``: two ranks of a launch whose shard this test serves. At
#: restart 0 rank 0's fit fails before setup (its output directory ``OUT`` in use, its lock
#: held by the test: :func:`tests.held_lock.held_until_asked`, which the launcher restarts)
#: while rank 1 sleeps, stopped by the launcher before its job check; at restart 1 rank 0 asks
#: for the lock and waits for rank 1's mark, so that rank 1's job check comes first, and both
#: train
RESTARTED = (
    """\
import os
import sys
import time
from pathlib import Path
import numpy as np
import distconv.distributed as dist
from distconv import Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network

restart = int(os.environ["DISTCONV_RESTART"])
OUT = sys.argv[2]
mark = Path(OUT + ".fitting")


def main():
    flags, options = {"pservers": sys.argv[1]}, {"insecure": True}
    sync = dist.init("sgd", lr=0.01, flags=flags, sync_options=options)
    try:
"""
    + SMALL_NET
    + ASK_FOR_THE_LOCK
    + """        if restart == 0 and sync.rank == 1:
            time.sleep(30)
        if restart == 1 and sync.rank == 0:
            deadline = time.monotonic() + 20
            while not mark.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(1.0)  # rank 1's hello and job check: a small net's setup, well within
        if restart == 1 and sync.rank == 1:
            mark.touch()
        trainer = Trainer(net, sync, 2, out_dir=OUT, progress=False)
        trainer.fit(data, epochs=1)
        print(f"rank {sync.rank} trained", flush=True)
    finally:
        sync.close()


dist.run_main(main)
"""
)


def test_a_restart_against_shards_that_stay_meets_its_noted_rank(tmp_path):
    """``distconv-launch local --servers 0 --max-restarts 1`` of a script whose shard outlives
    the restart: restart 1 trains (rank 1 was refused with restart 0's note, and the job
    ended, blaming rank 0's worker of restart 1). About 3 s: two starts of two ranks."""
    script = tmp_path / "restarted.py"
    script.write_text(RESTARTED)
    out = tmp_path / "out"
    shard = Shard(ShardConfig(bind="127.0.0.1:0", workers=2, insecure=True, job_id="j", timeout=30))
    with served(shard), held_until_asked(out, "j"):
        done = launch(
            "local", "--workers", "2", "--servers", "0", "--max-restarts", "1", "--job-id", "j",
            "--run-dir", str(tmp_path / "run"), "--", str(script), shard.endpoint,
            str(out), cwd=tmp_path, timeout=60,
        )  # fmt: skip
    said = done.stdout + done.stderr
    assert f"{out} is in use by pid {os.getpid()} on " in said, said[-3000:]  # restart 0's
    assert "restarting the job (1 of 1)" in said and "could not set up" not in said, said[-3000:]
    assert done.returncode == 0, said[-3000:]
    assert "rank 0 trained" in said and "rank 1 trained" in said, said[-3000:]
