"""A rank that could not set up makes the job check all the same, its description naming its
error (``fail_setup``); the other ranks' check says so: ``rank 0 could not set up: ...``, not
that the ranks run different jobs (a ``name`` '<missing>' here), words the launcher reads back
as the ranks' different jobs, blaming no rank and never restarting. MPI's check is run
under mpiexec in ``tests/mpi/test_fit_fails_before_setup.py``; this is the parameter server
workers' (:func:`~distconv.sync.ps.job_check.check_all_equal`), over shard 0's answers; and
what the launcher reads back from a rank's line (:class:`~launcher.failure.Failure`): that
rank's failure, as a shard's refusal of a hello tells it too."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from distconv.rank_endings import (
    different_jobs_in,
    setup_failure_in_lines,
    setup_failure_said_in_lines,
)
from distconv.script_main import run_main
from distconv.sync.description import as_sent, digest, first_difference
from distconv.sync.errors import JobRefused, setup_failure_description, setup_failure_in
from distconv.sync.peers import PEER_FAILED_STATUS, told_failure
from distconv.sync.ps.channel import shard_error
from distconv.sync.ps.job_check import check_all_equal
from distconv.sync.ps.job_hello import REFUSED_JOB, _difference
from distconv.sync.ps.stuck import different_jobs
from launcher.failure import Failure
from tests.setup_failures import told_by_a_shard

ERROR = "RunDirError: runs/x already holds a run"
FAILED = setup_failure_description(0, ERROR)
JOB = {"name": "mlp", "config": {"batch_size": 16}}


def _gather_of(descriptions: list[dict]):
    """Shard 0's answers to each rank's two all_equal gathers: digests, then the texts."""
    sent = [as_sent(d) for d in descriptions]

    def gather(kind: str, value):
        assert kind == "all_equal"
        if value is not None and len(value) == len(digest(sent[0])):
            return [digest(d) for d in sent]
        return [json.dumps(d, sort_keys=True) for d in sent]

    return gather


@pytest.mark.parametrize("rank", [0, 1])
def test_a_rank_that_could_not_set_up_is_named_with_its_error(rank):
    with pytest.raises(JobRefused) as raised:
        check_all_equal(_gather_of([FAILED, JOB]), rank, [FAILED, JOB][rank])
    said = str(raised.value)
    assert said == "rank 0 could not set up: RunDirError: runs/x already holds a run", said
    assert different_jobs_in([said]) is None
    assert raised.value.told_of == 0  # marked: the rank whose failure it tells of


def test_the_mark_survives_pickling_and_copy():
    """A thread's error is handed over pickled: a told worker's must stay told."""
    told = told_by_a_shard(1, 0)
    for made in (pickle.loads(pickle.dumps(told)), copy.copy(told), copy.deepcopy(told)):
        assert type(made) is JobRefused and str(made) == str(told) and made.told_of == 0
    assert pickle.loads(pickle.dumps(JobRefused("x"))).told_of is None


def test_different_jobs_are_said_as_before():
    other = {**JOB, "config": {"batch_size": 8}}
    with pytest.raises(JobRefused) as raised:
        check_all_equal(_gather_of([JOB, other]), 1, other)
    said = str(raised.value)
    assert said == "rank 1 and rank 0 run different jobs: config.batch_size: 8 here, 16 there"
    assert different_jobs_in([said]) is not None
    assert raised.value.told_of is None


@pytest.mark.parametrize(
    "line",
    [
        f"distconv train: error: {setup_failure_in(FAILED)}",  # MPI's, the workers' check
        f"[1] distconv.sync.mpi.comm.JobMismatch: {setup_failure_in(FAILED)}",  # a traceback's
        # a shard's refusal of a hello: it compares the descriptions itself (its own words)
        "fails.py: error: rank 1, hello: pserver 127.0.0.1:5: "
        + different_jobs(1, 0, first_difference(JOB, FAILED)),
        "fails.py: error: rank 1, all_equal:1: pserver 127.0.0.1:5: "
        + different_jobs(0, 1, first_difference(FAILED, JOB))
        + '; ranks are at different points of the job (rank 0: closed on "X")',
    ],
)
def test_the_launcher_blames_the_rank_that_could_not_set_up(line):
    """Rank 0's own error and rank 1's line naming it: a failure of rank 0's, its error the
    cause (rank 1 was only told), not the ranks' different jobs (no rank blamed, never
    restarted), nor a failure without a cause (the launcher read none)."""
    tail = ["distconv train: error: runs/x already holds a run", line]
    failure = Failure("worker", 1, 75, None, "l", tail, 0)
    told = f"rank 0 could not set up: {ERROR}"
    assert failure.cause == told and not failure.different_jobs, failure.describe()
    assert setup_failure_in_lines([line.partition("] ")[2] or line]) == (0, ERROR)
    assert failure.describe().endswith(f": {told}"), failure.describe()


def test_a_quote_of_the_words_in_another_failure_is_no_cause():
    """As for the ranks' different jobs: behind another class, the words are a quote."""
    failure = Failure("worker", 1, 1, None, "l", [f"ValueError: {setup_failure_in(FAILED)}"], 0)
    assert failure.cause is None, failure.describe()


_REFUSED_HELLO = (
    f"rank 1, hello: pserver h:5: {different_jobs(1, 0, first_difference(JOB, FAILED))}"
)


@pytest.mark.parametrize(
    ("made", "status"),
    [("shard", PEER_FAILED_STATUS), ("mpi", 1), ("script", 1)],
)
def test_a_worker_told_of_the_failure_exits_as_its_victim(capsys, made, status):
    """A parameter-server worker whose refusal only tells of rank 0's failure exits 75 under
    ``run_main`` (its line said), as on a ``PeerFailed``: the launcher then blames rank 0 where
    this worker exits first. Not MPI's refusal (``raised_alike``): one mpiexec child, 1. Nor a
    script's own ``JobRefused`` in the same words: it was taken for told by its text, exited
    75, and the launcher blamed rank 0 for the script's own failure."""
    told = shard_error(_REFUSED_HELLO, REFUSED_JOB["refused"])
    if made == "script":
        told = JobRefused(_REFUSED_HELLO)
    told.raised_alike = made == "mpi"

    def main():
        raise told

    with pytest.raises(SystemExit) as ended:
        run_main(main)
    assert ended.value.code == status
    assert str(told) in capsys.readouterr().err


_OWN_HELLO = different_jobs(0, 0, first_difference(JOB, FAILED))  # rank 0 set up again
_PLAIN = f"rank 2 could not set up: {ERROR}"  # the job check's words


def _refusal(made: str, text: str) -> JobRefused:
    """A refusal in ``text``'s words as ``made`` makes it: a shard's reply (``text`` its
    worker's message), the job check's (rank 2's failure, ``text`` _PLAIN), a script's own."""
    if made == "shard":
        refused = shard_error(text, REFUSED_JOB["refused"])
        assert isinstance(refused, JobRefused)
        return refused
    if made == "check":
        failed = [JOB, JOB, setup_failure_description(2, ERROR)]
        with pytest.raises(JobRefused) as raised:
            check_all_equal(_gather_of(failed), 1, JOB)
        assert str(raised.value) == text
        return raised.value
    return JobRefused(text)


@pytest.mark.parametrize(
    ("made", "text", "rank", "env", "told"),
    [
        ("shard", f"rank 0, hello: pserver h:5: {_OWN_HELLO}", None, {}, False),  # its own
        ("shard", f"rank 1, hello: pserver h:5: {_OWN_HELLO}", None, {}, False),  # never told
        ("check", _PLAIN, 2, {}, False),  # the rank it names is this one
        ("check", _PLAIN, None, {"RANK": "2", "WORLD_SIZE": "3"}, False),  # the launcher's RANK
        ("check", _PLAIN, None, {"RANK": "1", "WORLD_SIZE": "3"}, True),  # another's: told
        ("check", _PLAIN, None, {"RANK": "x"}, True),  # no rank to read: told, as before
        # a shard's reply leads with the rank that asked: it wins over the environment
        ("shard", f"rank 2, all_equal 1: pserver h:5: {_PLAIN}", None, {"RANK": "1"}, False),
        ("shard", f"rank 1, all_equal 1: pserver h:5: {_PLAIN}", None, {"RANK": "2"}, True),
        # a script's own in the words of either: its own failure, whatever rank they name
        ("script", _PLAIN, None, {"RANK": "1", "WORLD_SIZE": "3"}, False),
        ("script", f"rank 1, all_equal 1: pserver h:5: {_PLAIN}", 1, {}, False),
    ],
    ids=[
        "own-again",
        "other-again",
        "own-rank",
        "own-env",
        "other-env",
        "unknown",
        "own-lead",
        "other-lead",
        "script-words",
        "script-lead",
    ],
)
def test_a_rank_is_no_victim_of_its_own_failure(made, text, rank, env, told):
    """The rank that failed, set up again, is refused by the shard as another job than its
    first hello (the failure's): it exited 75 as its own victim, and the launcher waited for
    another rank to blame. A refusal is "told" only where distconv marked it so, naming
    another rank."""
    assert told_failure(_refusal(made, text), rank, env) is told


@pytest.mark.parametrize("failed_first", [True, False], ids=["here", "there"])
def test_a_long_error_cut_short_by_the_shard_is_still_read(failed_first):
    """A shard's refused hello quotes 400 characters of each value at most, ``...`` in place
    of the rest and of the closing quote: a rank's long error (a deep path) was no literal,
    and its told worker's line neither the cause nor a victim's (exit 1)."""
    long = f"CheckpointError: {'no checkpoint in /deep/' * 30}"
    pair = (setup_failure_description(0, long), JOB)
    said = different_jobs(1, 0, _difference(*(pair if failed_first else pair[::-1])))
    assert "..." in said and long not in said, said  # cut: the test's premise
    failure = Failure(
        "worker", 1, 75, None, "l", [f"fails.py: error: rank 1, hello: pserver h:5: {said}"], 0
    )
    assert (failure.cause or "").startswith(f"rank 0 could not set up: {long[:300]}"), said


@pytest.mark.parametrize(
    "line",
    [
        f"rank 0 could not set up: {ERROR}",
        f"rank 0 could not make its all_equal description: {ERROR}",
        "fails.py: error: rank 1, all_equal:1: pserver 127.0.0.1:5: "
        + different_jobs(0, 1, first_difference(FAILED, JOB)),
    ],
    ids=["setup", "meeting", "shard-refusal"],
)
def test_the_words_read_back_are_the_failure_s_own(line):
    """What :func:`setup_failure_said_in_lines` gives is what the ranks said of the failure: a
    meeting's words stay a meeting's (they were rebuilt as ``rank 0 could not set up``); a
    shard's refusal quoting a failed setup's name reads as the setup's words."""
    said = setup_failure_said_in_lines([line])
    meeting = "could not make its all_equal description" in line
    words = "could not make its all_equal description" if meeting else "could not set up"
    assert said == f"rank 0 {words}: {ERROR}", said
    assert setup_failure_in_lines([line]) == (0, ERROR)
