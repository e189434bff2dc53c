"""One rank's setup raising before the job check's exchange, the script catching it there
(real ``mpiexec -n 2``): the other rank learns at once, not at the watchdog's timeout."""

from __future__ import annotations

import sys
import time

import pytest

from distconv.rank_endings import different_jobs_in, setup_failure_in_lines
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: rank 1's setup raises before the job check (RANK1_SETUP: two parameters of one name; a
#: config that holds itself, which JSON cannot write; an item that is no parameter, in a list or
#: in a generator whose own filter fails on it; an error whose text cannot be made), catches it
#: and works alone for 30 s (no MPI) before it closes; rank 0's setup is good. The test's 20 s
#: end first, as would the watchdog's 40 s. Or its setup is good, and its description at the
#: meeting that follows (RANK1_MEETING) is one JSON cannot write: rank 0's close, after the
#: meeting's refusal, waits for rank 1's (RANK1_SLEEP, 3 s) as after any meeting refused
CAUGHT_ALONE = """\
import time
import numpy as np
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync

sync = MPISync(create_optimizer("sgd"), timeout=40)
w = Parameter("w", np.ones(3))
looped = []
looped.append(looped)


class Unsayable(ValueError):
    def __str__(self):
        raise RuntimeError("no text")


def unsayable(p):
    raise Unsayable


params, config = ({RANK1_SETUP}) if sync.rank == 1 else ([w], {{}})
try:
    try:
        sync.setup(params, config)
        sync.all_equal({RANK1_MEETING} if sync.rank == 1 else {{"data": 1}})
    except (ValueError, AttributeError, TypeError) as error:
        print(f"rank {sync.rank} caught: {type(error).__name__}", flush=True)
        time.sleep({RANK1_SLEEP})
finally:
    sync.close()
"""


@pytest.mark.parametrize(
    ("rank1_setup", "error"),
    [
        ('[w, Parameter("w", np.zeros(2))], {}', "ValueError: two parameters"),
        ('[w], {"data": looped}', "ValueError: Circular reference detected"),
        ("[w, None], {}", "TypeError: setup: item 1 is None, not a Parameter"),
        (
            "(p for p in [w, None] if p.value is not None), {}",
            "AttributeError: 'NoneType' object has no attribute 'value'",
        ),
        ("(p for p in [w] if unsayable(p)), {}", "Unsayable (its text could not be made)"),
    ],
    ids=[
        "two-parameters-of-one-name",
        "config-holding-itself",
        "no-parameter",
        "generator",
        "error-without-text",
    ],
)
def test_a_setup_that_raises_on_one_rank_before_the_job_check_is_told_at_once(
    rank1_setup, error, tmp_path
):
    """Rank 1's setup refused its parameters before the job check, and rank 1 went on alone:
    rank 0 waited in the job check's exchange until rank 1's close aborted, or the watchdog's
    timeout (600 s by default). The exchange is made all the same, naming the error, so rank 0
    raises a JobMismatch saying it at once. So where rank 1's config holds itself: its JSON,
    written inside the job check once its first exchange was made, failed there, and rank 0
    waited in the digests' gather; and where one of its parameters is none (None): MPISync
    read each one's device before the base setup took them, outside its guard; and where
    a generator's own filter fails on it: MPISync listed it there still; and where the
    error's own ``__str__`` raises: its text, made before the exchange, raised there."""
    rank0_is_told_at_once(tmp_path, (rank1_setup, '{"data": 1}', "30"), f"{BEFORE_CHECK}: {error}")


#: what rank 0's JobMismatch says where rank 1's setup failed before the job check: what
#: happened, not a difference of jobs (it said "name: '<missing>' here, 'setup failed ...' there")
BEFORE_CHECK = "rank 1 could not set up"


def test_a_meeting_whose_description_fails_on_one_rank_is_told_at_once(tmp_path):
    """Both set up, then rank 1's description at an ``all_equal`` meeting (as the Trainer's,
    or a script's own) holds itself, which JSON cannot write: raised before the meeting's
    exchange, rank 0 waited there until rank 1's close aborted, or the watchdog's timeout. The
    meeting is made all the same, its description naming the error: rank 0 raises a
    JobMismatch saying it, where rank 1's close told it "rank 1 closed". In words of rank 1's
    own failure, which the launcher reads back as such (blamed, restarted), not as the ranks'
    different jobs ("name: '<missing>' here, 'all_equal failed ...' there")."""
    said = "rank 1 could not make its all_equal description: ValueError: Circular reference"
    line = rank0_is_told_at_once(tmp_path, ("[w], {}", '{"data": looped}', "3"), said)
    assert different_jobs_in([line]) is None, line
    assert setup_failure_in_lines([line]) == (1, "ValueError: Circular reference detected"), line


def rank0_is_told_at_once(tmp_path, rank1: tuple[str, str, str], said: str) -> str:
    """Run :data:`CAUGHT_ALONE` with rank 1's setup, meeting and sleep (``rank1``): rank 0
    raises a JobMismatch saying ``said`` at once; returns the traceback's line saying it."""
    script = tmp_path / "alone.py"
    text = CAUGHT_ALONE.replace("{{", "{").replace("}}", "}")
    for name, value in zip(("SETUP", "MEETING", "SLEEP"), rank1, strict=True):
        text = text.replace(f"{{RANK1_{name}}}", value)
    script.write_text(text)
    began = time.monotonic()
    # under mpi4py's runner, whose abort on rank 0's JobMismatch ends rank 1's work alone
    done = run_mpi(["-n", "2", sys.executable, "-m", "mpi4py", str(script)], timeout=20)
    assert done.returncode != 0, done.stdout + done.stderr[-3000:]
    assert "rank 1 caught: " in done.stdout, done.stdout
    lines = [line for line in done.stderr.splitlines() if line.startswith("distconv.sync")]
    said_by = [
        line
        for line in lines
        if line.startswith("distconv.sync.mpi.comm.JobMismatch: ") and said in line
    ]
    assert said_by, done.stderr[-3000:]
    assert time.monotonic() - began < 15
    return said_by[0]


#: rank 0 is given a checkpoint's optimizer state that does not fit (Adam's ``m`` of another
#: shape): its load fails after the job check, before the broadcast. Each rank catches what its
#: setup raised, says it, and sets up again without that state (a script falling back to a
#: fresh start); the watchdog's 40 s end after the test's 20 s
BAD_STATE_RETRIED = """\
import numpy as np
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync

sync = MPISync(create_optimizer("adam"), timeout=40)
w = Parameter("w", np.full(3, float(sync.rank)))
try:
    try:
        sync.setup([w], {}, {"w": {"m": np.zeros(2)}} if sync.rank == 0 else None)
    except Exception as error:
        print(f"rank {sync.rank} caught {type(error).__name__}: {error}", flush=True)
        sync.setup([w], {})
    print(f"rank {sync.rank} set up again: {w.value.tolist()}", flush=True)
finally:
    sync.close()
"""


def test_a_checkpoints_state_refused_on_rank_0_after_the_job_check_is_told_at_once(tmp_path):
    """Rank 0's load of the checkpoint's optimizer state failed after the job check: rank 1
    waited in the parameters' broadcast until the watchdog's timeout (600 s by default), or
    rank 0's close aborted, and a setup rank 0 made again met it there. Every rank now says
    whether it made its state before the broadcast: rank 1 raises at once naming rank 0's
    error, nothing broadcast, and both set up again together."""
    script = tmp_path / "state.py"
    script.write_text(BAD_STATE_RETRIED)
    began = time.monotonic()
    done = run_mpi(["-n", "2", sys.executable, str(script)], timeout=20)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "rank 0 caught ValueError: MPISync.load_state_dict: w/m: shape (2,)" in done.stdout
    assert (
        "rank 1 caught SyncError: setup failed on rank 0 after the job check, before the "
        "parameters' broadcast: ValueError: MPISync.load_state_dict: w/m" in done.stdout
    ), done.stdout
    for rank in range(2):  # rank 0's values on both, broadcast by the setup made again
        assert f"rank {rank} set up again: [0.0, 0.0, 0.0]" in done.stdout, done.stdout
    assert time.monotonic() - began < 15
