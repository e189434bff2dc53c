"""The equivalence check (:mod:`distconv.equivalence`) on ranks that are real processes meeting
over TCP on 127.0.0.1 (:mod:`tests.sync.star_sync`): a right transport passes, and each fault
that trains on silently (an example count of its own, no broadcast, a rank's gradients left
out) fails it, naming the rank and the parameter; a rank that raises, dies or hangs is named,
and no process it started outlives the call."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from distconv.equivalence import (
    JOB,
    Job,
    assert_matches_local,
    assert_rank_matches_local,
    max_relative_difference,
    mismatch,
    weights,
)
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from tests.child_env import child_env
from tests.equivalence_failures import assert_names_ranks_and_parameters
from tests.processes import job_left, run_job
from tests.sync.star_sync import (
    ForgetfulSync,
    LocalMeanSync,
    NoBroadcastSync,
    NoLrScaleSync,
    OwnExamplesSync,
    StarSync,
    star,
)

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("world", [2, 3])
def test_a_right_transport_on_processes_matches_one_process(tmp_path, world):
    ranks = assert_matches_local(star(StarSync, tmp_path / "meeting"), world)
    assert len(ranks) == world
    # trained: the weights moved, so matching the reference says something
    assert max_relative_difference(ranks[0], weights(JOB.model_of(0))) > 1e-2


def _slow_rank_0(optimizer, rank: int, world_size: int, meeting: Path):
    if rank == 0:
        time.sleep(0.5)  # its start-up is slower than the others' (not a fault)
    return StarSync(optimizer, rank, world_size, meeting=meeting)


def test_a_transport_made_again_from_the_same_meeting_file(tmp_path):
    """One make_sync for two calls, as a test parametrized over world sizes holds one: the
    second call's ranks find the first call's address there before rank 0 writes its own."""
    make = functools.partial(_slow_rank_0, meeting=tmp_path / "meeting")
    assert_matches_local(make, 2)
    assert_matches_local(make, 3)


@pytest.mark.parametrize(
    "kind, ranks",
    [
        (OwnExamplesSync, "01"),  # right until the uneven last step, where each rank counts its own
        (NoBroadcastSync, "1"),  # rank 1 trains from its own seed's weights (rank 0 too is off)
        (ForgetfulSync, "01"),  # rank 1's gradients never count, on either rank
        (NoLrScaleSync, "01"),  # the job's decaying rate never applied
    ],
)
def test_a_silent_fault_fails_naming_the_rank_and_the_parameter(tmp_path, kind, ranks):
    with pytest.raises(AssertionError) as failed:
        assert_matches_local(star(kind, tmp_path / "meeting"), 2)
    assert_names_ranks_and_parameters(str(failed.value), ranks)


def test_an_even_job_does_not_tell_an_example_count_of_its_own(tmp_path):
    """Why the check's job ends in an uneven step: 48 examples, 6 whole steps, hide the fault."""
    assert_matches_local(star(OwnExamplesSync, tmp_path / "meeting"), 2, Job(examples=48))


def test_a_step_with_no_examples_on_a_rank_is_a_job_of_its_own(tmp_path):
    """The default job gives every rank an example in its last step; 41 examples on 2 ranks
    leave rank 1 none in it, which a transport exchanging mean gradients turns into NaN."""
    for name in ("default", "right", "empty"):
        (tmp_path / name).mkdir()
    assert_matches_local(star(LocalMeanSync, tmp_path / "default" / "meeting"), 2)  # invisible here
    assert_matches_local(star(StarSync, tmp_path / "right" / "meeting"), 2, Job(examples=41))
    with pytest.raises(AssertionError, match="rank 1 failed .*NaN"):
        assert_matches_local(
            star(LocalMeanSync, tmp_path / "empty" / "meeting"), 2, Job(examples=41)
        )


def _dies(optimizer, rank: int, world_size: int, meeting: Path):
    if rank == 1:
        print("rank 1: the link is gone", file=sys.stderr, flush=True)
        os._exit(3)
    return StarSync(optimizer, rank, world_size, meeting=meeting)


def _raises(optimizer, rank: int, world_size: int, meeting: Path):
    if rank == 1:
        raise ConnectionResetError("rank 1 lost rank 0")
    return StarSync(optimizer, rank, world_size, meeting=meeting)


def _hangs(optimizer, rank: int, world_size: int, meeting: Path, pids: Path):
    (pids / str(rank)).write_text(str(os.getpid()))
    if rank == 1:
        time.sleep(600)
    return StarSync(optimizer, rank, world_size, meeting=meeting)


def _hangs_with_a_helper(optimizer, rank: int, world_size: int, meeting: Path, pids: Path):
    """Each rank starts a helper process (as a transport may: a server, a proxy); rank 1 hangs."""
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (pids / str(helper.pid)).write_text("")
    return _hangs(optimizer, rank, world_size, meeting, pids / "ranks")


def test_a_rank_s_own_processes_are_killed_with_it(tmp_path):
    (tmp_path / "pids" / "ranks").mkdir(parents=True)
    make = functools.partial(_hangs_with_a_helper, meeting=tmp_path / "m", pids=tmp_path / "pids")
    helpers = []
    try:
        # long enough for both ranks to start their helpers on a loaded machine
        with pytest.raises(AssertionError, match=r"still ran after 10 s: killed"):
            assert_matches_local(make, 2, timeout=10)
        helpers = [int(f.name) for f in (tmp_path / "pids").iterdir() if f.is_file()]
        assert len(helpers) == 2
        time.sleep(0.2)  # killed, and reaped by init
        left = [pid for pid in helpers if _running(pid)]
        assert not left, f"the ranks' helper processes {left} outlived the call"
    finally:
        for pid in helpers:  # only those this test started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class _FailsMidway(StarSync):
    """Rank 1 raises in its third step and takes a moment to close (joining a thread of its
    own, say), so that rank 0, its connection gone, fails first."""

    steps = 0

    def finish_step(self) -> None:
        _FailsMidway.steps += 1
        if self.rank == 1 and _FailsMidway.steps == 3:
            raise MemoryError("rank 1 ran out of memory in its third step")
        super().finish_step()

    def close(self) -> None:
        super().close()
        if self.rank == 1:
            time.sleep(0.5)


def test_a_rank_that_fails_its_peers_is_named_with_them(tmp_path):
    """Rank 0 fails first, of rank 1's failure: both are named, the cause with its error."""
    with pytest.raises(AssertionError) as failed:
        assert_matches_local(star(_FailsMidway, tmp_path / "meeting"), 2)
    said = str(failed.value)
    assert "rank 0 failed (exit status 1)" in said, said  # the consequence
    assert "rank 1 failed (exit status 1): MemoryError: rank 1 ran out of memory" in said, said


def test_a_rank_that_dies_is_named_with_its_exit_status_and_output(tmp_path):
    began = time.monotonic()
    with pytest.raises(AssertionError) as failed:
        assert_matches_local(functools.partial(_dies, meeting=tmp_path / "m"), 2)
    said = str(failed.value)
    assert "rank 1 failed (exit status 3)" in said, said
    assert "rank 1: the link is gone" in said, said
    # at once: not after the timeout, though rank 0 was waiting for rank 1 to connect
    assert time.monotonic() - began < 30


def test_a_rank_that_raises_is_named_with_its_error(tmp_path):
    with pytest.raises(AssertionError) as failed:
        assert_matches_local(functools.partial(_raises, meeting=tmp_path / "m"), 2)
    said = str(failed.value)
    assert "rank 1 failed (exit status 1): ConnectionResetError: rank 1 lost rank 0" in said
    assert "Traceback" in said  # the end of its output: where it raised


def test_ranks_that_hang_are_killed_after_the_timeout_and_named(tmp_path):
    (tmp_path / "pids").mkdir()
    make = functools.partial(_hangs, meeting=tmp_path / "m", pids=tmp_path / "pids")
    began = time.monotonic()
    with pytest.raises(AssertionError, match=r"rank\(s\) 0, 1 still ran after 3 s: killed"):
        assert_matches_local(make, 2, timeout=3)
    assert time.monotonic() - began < 20
    for pid in (tmp_path / "pids").iterdir():
        with pytest.raises(ProcessLookupError):  # gone, and waited for
            os.kill(int(pid.read_text()), 0)


def test_a_make_sync_that_cannot_be_pickled_is_a_type_error_naming_it(tmp_path):
    with pytest.raises(TypeError, match="make_sync must be picklable.*not a lambda"):
        assert_matches_local(lambda opt, rank, world: StarSync(opt, rank, world, meeting=""), 2)
    with pytest.raises(ValueError, match="world_size must be an int >= 1"):
        assert_matches_local(star(StarSync, tmp_path / "meeting"), 0)


def test_one_rank_s_share_in_this_process():
    """The rank run as a script under its own launcher calls it; a world of one here."""
    sync = LocalSync(JOB.make_optimizer())
    try:
        got = assert_rank_matches_local(sync, world_size=1)
    finally:
        sync.close()
    assert sorted(got) == sorted(weights(JOB.model_of(0)))
    other = LocalSync(create_optimizer("adam", lr=0.02))
    with pytest.raises(ValueError, match="the sync's optimizer is .*'lr': 0.02"):
        assert_rank_matches_local(other, world_size=1)


@pytest.mark.parametrize("world_size", [None, 2])
def test_a_rank_in_a_world_of_its_own_fails_the_rank_run(world_size):
    """Each process a launcher started, its sync in a world of one (the ranks never met),
    trains alone and matches a reference of one rank: the rank run refuses it instead."""
    sync = LocalSync(JOB.make_optimizer())
    try:
        wanted = "2 or more" if world_size is None else "2"
        said = f"rank 0 of 1: the rank run expects {wanted} ranks"
        with pytest.raises(AssertionError, match=said):
            assert_rank_matches_local(sync, world_size=world_size)
    finally:
        sync.close()


def test_a_mismatch_names_the_parameter_and_where():
    expected = {"a": np.zeros(3), "b": np.ones((2, 2))}
    assert mismatch(expected, {k: v.copy() for k, v in expected.items()}) is None
    got = {"a": np.zeros(3), "b": np.array([[1.0, 1.0], [1.0, 1.5]])}
    said = mismatch(expected, got)
    assert said.startswith("parameter 'b' is 0.5 from the reference's at (1, 1) (1.5 here, 1.0")
    got["b"][0, 0] = np.nan
    assert mismatch(expected, got).startswith("parameter 'b'")  # NaN is not within anything
    assert "not in both" in mismatch(expected, {"a": np.zeros(3)})


_UNGUARDED = """
import functools, sys
from distconv.equivalence import assert_matches_local
from tests.sync.star_sync import StarSync
assert_matches_local(functools.partial(StarSync, meeting=sys.argv[1]), 2, timeout=30)
"""

_DEFINED_IN_MAIN = """
import sys
from distconv.equivalence import assert_matches_local
from tests.sync.star_sync import StarSync
def make(optimizer, rank, world_size):
    return StarSync(optimizer, rank, world_size, meeting=sys.argv[1])
if __name__ == "__main__":
    assert_matches_local(make, 2, timeout=30)
"""


def _error_of(argv: list[str]) -> str:
    """The AssertionError a script that calls the check ends with, and what follows it."""
    ran = run_job([sys.executable, *argv], child_env(), timeout=60)
    assert ran.returncode == 1, ran.stderr
    assert not job_left(ran.env, 1), "a process of the script's outlived it"
    return ran.stderr[ran.stderr.index("AssertionError: ") :]


def test_a_script_without_a_main_guard_is_told_why_its_ranks_failed(tmp_path):
    """Spawn imports the script again in each rank, where the call fails before the rank runs:
    its error goes to the caller's stderr, and the check says where to look and what to do."""
    (tmp_path / "check.py").write_text(_UNGUARDED)
    said = _error_of([str(tmp_path / "check.py"), str(tmp_path / "m")])
    assert "rank 0 failed (exit status 1): it ended before its function ran" in said, said
    assert "'if __name__ == \"__main__\":'" in said, said


def test_a_make_sync_the_ranks_cannot_import_is_the_rank_s_error(tmp_path):
    """A make_sync in ``python -c``'s __main__ pickles, but no rank's __main__ has it."""
    said = _error_of(["-c", _DEFINED_IN_MAIN, str(tmp_path / "m")])
    assert re.search(r"rank 0 failed \(exit status 1\): AttributeError: .*'make'", said), said
