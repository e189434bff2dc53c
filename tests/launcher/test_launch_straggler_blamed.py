"""A worker stopped (SIGSTOP: a straggler, as an operator meets one) past the shards'
``--timeout`` is the failure ``distconv-launch`` reports, not the healthy worker it left; a
shard stopped so is too, not the worker that gave up on it first.

The shard fails the job naming the stopped rank (``rank 1 (host ..., last step N) sent nothing
for step N+1 ... within 1 s``; asynchronously ``... silent for 1 s``); the healthy worker stops
on those words (exit 75, a victim) and is the only child that exits within ``--settle``: the
stopped one never exits by itself. The launcher reported that victim: its headline,
``failure.json`` (``rank`` 0, ``cause`` null) and its exit status 75 ("try again") all named
worker 0. It now reads the rank the shard named in the victim's last lines, as it reads a rank
that could not set up, and blames that worker.

A stopped shard never answers, and never exits: every worker gives up on it (``rank 0: no answer
to step N from pserver shard(s) 0 (...) within 1.5 s``, exit 1), and the launcher reported
``worker 0 failed with exit code 1``, the shard named nowhere but in that line.

Either way the launcher's stop finds the process stopped before its SIGCONT lets it run to its
SIGTERM, and the headline says so (``... was stopped (SIGSTOP), not crashed``), where it said
only "stopped, stuck or slower", "stopped, hung or cut off"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distconv.straggler_words import RAISE_TIMEOUT, sent_nothing_text
from launcher.failure import Failure
from launcher.stopped_processes import stopped_way_out
from tests.launcher.stopped_child import launch_stopping

#: two workers and a shard training the digits for longer than the test lasts, whose shard
#: gives up on a rank after 1 s
TRAIN = ("--workers", "2", "--servers", "1")
TRAIN_ARGS = ("--", "--epochs", "200", "--no-progress", "--timeout", "1")
#: what the headline of a child whose process the launcher's stop found stopped ends with
STOPPED_WAY_OUT = stopped_way_out("SIGSTOP")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("mode", "words"), [("sync", "sent nothing for "), ("async", "silent for 1 s")]
)
def test_a_stopped_worker_is_blamed_not_the_worker_it_left(tmp_path, mode, words):
    ended = launch_stopping(tmp_path, "worker", 1, *TRAIN, "--mode", mode, *TRAIN_ARGS)
    report = ended.report
    assert report is not None, ended.output[-3000:]
    assert (report["role"], report["rank"]) == ("worker", 1), ended.output[-3000:]
    assert report["cause"].startswith("rank 1 (host "), report["cause"]
    assert words in report["cause"] and report["cause"].endswith(RAISE_TIMEOUT), report["cause"]
    stopped = f"; its process (pid {ended.pid}, on this host) is stopped (SIGSTOP, Ctrl-Z, "
    assert stopped in report["cause"], report["cause"]  # the shard saw why it was silent
    assert [(v["rank"], v["exit_code"]) for v in report["victims"]] == [(0, 75)], report
    headline = (  # the launcher found it stopped before its stop let it run: it says so
        f"distconv-launch: worker 1's process (pid {ended.pid}) was stopped (SIGSTOP), not "
        f"crashed: {report['cause']}; {STOPPED_WAY_OUT} (after 0 restart(s)); worker 0 stopped "
        "because of it (exit code 75)"
    )
    assert headline in ended.output, ended.output[-3000:]
    assert ended.status == 1, ended.output[-3000:]  # the cause's: no victim's "try again"


@pytest.mark.timeout(120)
def test_a_stopped_shard_is_blamed_not_the_workers_that_gave_up_on_it(tmp_path):
    ended = launch_stopping(tmp_path, "server", 0, *TRAIN, *TRAIN_ARGS)
    report = ended.report
    assert report is not None, ended.output[-3000:]
    assert (report["role"], report["rank"]) == ("server", 0), ended.output[-3000:]
    # each worker that gave up on it by then (both, but for one the stop reached first)
    gave_up = (
        r"worker \d(, worker \d)? gave up on it: rank \d: no answer to .+ from pserver "
        r"shard\(s\) 0 \(127\.0\.0\.1:\d+\) within 1\.5 s \(1\.5 x --timeout 1 s\): the shard is "
        r"gone, stopped or unreachable; raise --timeout if it is only slow"
    )
    assert re.fullmatch(gave_up, report["cause"]), report["cause"]
    headline = (  # not "stopped, hung or cut off": the launcher found it stopped
        f"distconv-launch: server 0's process (pid {ended.pid}) was stopped (SIGSTOP), not "
        f"crashed: {report['cause']}; {STOPPED_WAY_OUT} (after 0 restart(s)); last lines of "
    )
    assert headline in ended.output, ended.output[-3000:]
    assert ended.status == 1, ended.output[-3000:]


def _straggler(**ended) -> Failure:
    """Worker 1's failure, its cause the shard's words naming it alone, ended as ``ended``."""
    words = sent_nothing_text(
        "rank 1 (host vm, last step 184)", "step 185 (the push of parameter conv1.weight)", 10
    )
    victim = {"role": "worker", "rank": 0, "exit_code": 75, "log": "w0.log"}
    fields = {"exit_code": 1, "signal": None, "signal_number": None, **ended}
    return Failure(
        role="worker", rank=1, log="w1.log", tail=[], restart=0,
        cause=f"{words}; {RAISE_TIMEOUT}", victims=[victim], named=True, **fields,
    )  # fmt: skip


def test_a_straggler_killed_by_a_signal_of_its_own_is_said_so():
    """A worker slow past the shards' ``--timeout`` (swapping, say) that a signal of its own
    then ended within ``--settle`` (the OOM killer's SIGKILL) crashed: the headline says the
    signal, as it did before stragglers were named, the shard's words after it."""
    failure = _straggler(exit_code=None, signal="SIGKILL", signal_number=9)
    assert failure.describe().startswith(
        "worker 1 failed with signal SIGKILL: rank 1 (host vm, last step 184) sent nothing for "
    ), failure.describe()
    assert failure.status == 137
    assert _straggler(exit_code=75).describe().startswith("worker 1 kept its shard waiting")


def test_the_straggler_headline_in_the_docs_is_the_launchers():
    """docs/operations.md's example is what :class:`~launcher.failure.Failure` says of a
    straggler the shard named (the words the launch above checks), not a paraphrase."""
    failure = _straggler()
    said = f"distconv-launch: {failure.describe()} (after 0 restart(s)){failure.stopped_too()};"
    docs = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    assert f"\n{said} last lines of '/home/me/runs/j/logs/worker-1.log':\n" in docs, said
    assert failure.status == 1
