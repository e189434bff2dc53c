"""A rank whose setup cannot start, or fails before its job check, tells the other ranks and
closes without aborting the job (real ``mpiexec -n 2``, no ``-m mpi4py``: MPISync's own
hook and close decide). The other ranks raise a ``JobMismatch`` naming that rank and its error
at once; each rank says its own error, none ``aborting the MPI job``."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from distconv.sync.others_told import others_told
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.setup_failures import FAILS_BEFORE_SETUP, NO_CHECKPOINT, TOLD_OF_RANK_0

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: what neither rank may say: an abort of the job (MPISync's close, or mpiexec's report of it)
ABORTS = ("aborting the MPI job", "MPI_Abort")


def test_a_fit_that_fails_before_setup_on_rank_0_is_told_to_rank_1(tmp_path):
    """Rank 0's fit refused ``resume=True`` (no checkpoint where it alone looks) before its
    sync's setup; rank 1 went on into setup and waited in the job check until rank 0's close,
    with the CheckpointError propagating, aborted the job: a traceback from rank 0, nothing
    from rank 1 but the abort. ``Trainer.fit`` now calls ``fail_setup``: the job check is made
    naming the error, rank 1 says in one line that rank 0 failed and why, and rank 0's close
    leaves the job (its error is already told)."""
    script = tmp_path / "fails.py"
    script.write_text(FAILS_BEFORE_SETUP)
    began = time.monotonic()
    done = run_mpi(["-n", "2", sys.executable, str(script), str(tmp_path / "none")], timeout=30)
    took = time.monotonic() - began
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-3000:]
    assert not any(abort in said for abort in ABORTS), said[-3000:]
    # each rank's own line, one write each: rank 1's says what happened, not a difference of
    # jobs (the launcher would blame no rank); rank 0's its own error, in one line as
    # distconv train says it (it was a traceback)
    assert "Traceback" not in said, said[-3000:]
    lines = sorted(re.findall(r"fails\.py: error: [^\n]*\n", done.stderr))
    assert len(lines) == 2, said[-3000:]
    assert lines[0].startswith(f"fails.py: error: {NO_CHECKPOINT}"), lines
    assert lines[1].startswith(
        f"fails.py: error: {TOLD_OF_RANK_0} {tmp_path / 'none'}/checkpoints"
    ), lines
    assert took < 20, f"took {took:.1f} s"


#: rank 1's setup raises before its job check (two parameters of one name), the error
#: propagating through its ``finally: sync.close()`` to the end of the script
RAISES_BEFORE_CHECK = """\
import numpy as np
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync

sync = MPISync(create_optimizer("sgd"), timeout=40)
w = Parameter("w", np.ones(3))
try:
    sync.setup([w, Parameter("w", np.zeros(2))] if sync.rank == 1 else [w], {})
finally:
    sync.close()
"""


def test_a_setup_failure_told_before_the_job_check_closes_without_an_abort(tmp_path):
    """Rank 1's setup raised before its job check and told rank 0 there, but its close
    then aborted the job all the same ("sync closed in the middle of setup (it failed)"), a
    traceback on every rank: the job check was made on every rank, none waits for rank 1. Its
    close now leaves, as rank 0's does after the JobMismatch: each rank's own error, no abort."""
    script = tmp_path / "raises.py"
    script.write_text(RAISES_BEFORE_CHECK)
    done = run_mpi(["-n", "2", sys.executable, str(script)], timeout=30)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-3000:]
    assert not any(abort in said for abort in ABORTS), said[-3000:]
    # rank 1's own error: its note (the ranks' lines may interleave in mpiexec's stderr)
    assert others_told(1) in said, said[-3000:]
    told = "JobMismatch: rank 1 could not set up: ValueError: two parameters are named 'w'"
    assert told in done.stderr, said[-3000:]


#: rank 0 cannot set up (a ValueError) and tells rank 1 (``tell_setup_failed``, as fit does),
#: a Ctrl-C arriving as its exchange begins (a SIGINT to itself: held to the exchange's end);
#: rank 1 sets up. Each says what it raised, then both close, nothing propagating; given
#: ``run_main``, each closes, then raises it again for ``run_main`` to end the script with;
#: given ``finally``, each closes in a ``finally`` as it propagates (the README's pattern), in
#: ``run_main``; given ``bare``, so too without ``run_main``, the error ending the script.
#: With ``first`` too, both ranks set up first (rank 0's is a second fit's: nothing is open as
#: the Ctrl-C comes, and its close makes the last exchange); with ``untold``, so too, and rank
#: 0's Ctrl-C arrives just before the exchange: raised there, the exchange never made, so rank 1
#: waits in its job check. With ``retry``, rank 1 sets up again after its JobMismatch (the way
#: on after a failed setup: a second fit), where rank 0, interrupted, never comes. With
#: ``barrier`` (and ``first``), rank 1 waits at a barrier in place of its setup; with ``calm``,
#: no Ctrl-C comes
INTERRUPTED_TELLING = """\
import os
import signal
import sys
import numpy as np
from distconv.distributed import run_main
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import tell_setup_failed
from distconv.sync.mpi import MPISync
from distconv.sync.mpi.comm import JobMismatch

sync = MPISync(create_optimizer("sgd"), timeout=40)
untold = "untold" in sys.argv
if untold or "first" in sys.argv:
    sync.setup([Parameter("w", np.ones(3))], {})
# the exchange, or (untold) the held stretch around it, that the Ctrl-C comes at the start of
hooked = "_tell_failed_setup" if untold else "_fail_before_check"
exchange = getattr(sync, hooked)


def interrupted(error):
    os.kill(os.getpid(), signal.SIGINT)
    exchange(error)


if "calm" not in sys.argv:
    setattr(sync, hooked, interrupted)


def fit():
    if sync.rank == 0:
        error = ValueError("no checkpoint here")
        tell_setup_failed(sync, error)
        raise error  # as Trainer.fit does, once told (calm: no Ctrl-C raised in its place)
    elif "barrier" in sys.argv:
        sync.barrier()
    else:
        try:
            sync.setup([Parameter("w", np.ones(3))], {})
        except JobMismatch:
            if "retry" not in sys.argv:
                raise
            sync.setup([Parameter("w", np.ones(3))], {})


def set_up():
    try:
        fit()
    except BaseException as raised:
        return raised
    return None


def main():
    raised = set_up()
    sync.close()
    if raised is not None:
        raise raised


def closing():
    try:
        fit()
    finally:
        sync.close()


if sys.argv[1:2] == ["run_main"]:
    run_main(main)
if sys.argv[1:2] == ["finally"]:
    run_main(closing)
if sys.argv[1:2] == ["bare"]:
    closing()
raised = set_up()
if raised is not None:
    said = [f"{type(raised).__name__}: {raised}", *getattr(raised, "__notes__", [])]
    print(f"rank {sync.rank} raised " + " | ".join(said), flush=True)
sync.close()
"""
#: the note on rank 0's Ctrl-C: what it cut short, then whether the others were told
CUT_SHORT = "this rank could not set up (ValueError: no checkpoint here)"
TOLD_AND_INTERRUPTED = f"{CUT_SHORT}; the others were told"


def test_a_ctrl_c_while_telling_the_failure_is_raised_saying_it(tmp_path):
    """A Ctrl-C during ``fail_setup`` is the user's: a KeyboardInterrupt ends the run, but the
    error it cut short was only its context, which a one-line ending ("interrupted") never
    says: a note on it names that error, and that the other ranks were told."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED_TELLING)
    done = run_mpi(["-n", "2", sys.executable, str(script)], timeout=30)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert f"rank 0 raised KeyboardInterrupt:  | {TOLD_AND_INTERRUPTED}" in done.stdout, said
    assert "rank 1 raised JobMismatch: rank 0 could not set up: ValueError" in done.stdout


@pytest.mark.parametrize("closed", [["run_main"], ["finally", "first"]], ids=["main", "finally"])
def test_run_main_says_what_the_ctrl_c_cut_short(tmp_path, closed):
    """``run_main`` ended such a Ctrl-C with ``interrupted`` alone (exit 130): the error the fit
    failed with, and whether the other ranks were told, were said nowhere. The note's lines
    follow that line, in its form; rank 1 says its refusal as before. So where each rank closes
    in a ``finally`` as the error propagates (``finally``; a setup succeeded before, so close
    makes the last exchange): rank 0's close aborted the job there (``rank 0:
    KeyboardInterrupt; aborting the MPI job``, the note in the abort's traceback alone), where
    the note says the others were told, so none waits; it now leaves."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED_TELLING)
    done = run_mpi(["-n", "2", sys.executable, str(script), *closed], timeout=30)
    said = done.stdout + done.stderr
    ended = ["interrupted.py: interrupted", f"interrupted.py: {TOLD_AND_INTERRUPTED}"]
    lines = done.stderr.splitlines()
    assert any(lines[i : i + 2] == ended for i in range(len(lines))), said[-3000:]
    assert "interrupted.py: error: rank 0 could not set up: ValueError" in done.stderr, said
    assert "raised" not in done.stdout and "Traceback" not in said, said[-3000:]
    assert not any(abort in said for abort in ABORTS), said[-3000:]
    # rank 0's 130 and rank 1's 1, which MPICH's mpiexec (Hydra) ORs
    assert done.returncode == 130 | 1, said[-3000:]


def test_a_ctrl_c_told_propagating_without_run_main_leaves_the_job(tmp_path):
    """Without ``run_main``, the Ctrl-C raised by ``fail_setup`` once the others were told
    ends rank 0's script as Python ends one (its traceback, then the SIGINT that killed it,
    which ``mpiexec`` reports); its close in the ``finally`` leaves the job, where it aborted
    it before: the note shows in that traceback, no abort anywhere (a setup succeeded before:
    close makes the last exchange, which a rank that set up again would meet)."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED_TELLING)
    done = run_mpi(["-n", "2", sys.executable, str(script), "bare", "first"], timeout=30)
    said = done.stdout + done.stderr
    # (its lines only: rank 1's traceback may come between them in mpiexec's stderr)
    assert "KeyboardInterrupt" in done.stderr, said[-3000:]
    assert TOLD_AND_INTERRUPTED in done.stderr, said[-3000:]
    assert not any(abort in said for abort in ABORTS), said[-3000:]
    assert done.returncode != 0, said[-3000:]  # rank 0 killed by its SIGINT (Python's way)


def test_a_ctrl_c_before_the_others_were_told_still_aborts_the_job(tmp_path):
    """Rank 0's Ctrl-C came just before ``fail_setup``'s exchange: rank 1 was never told and
    waits in its setup's job check. Its note says so, and rank 0's close, in a ``finally`` as
    the Ctrl-C propagates, must abort the job (nothing is open on rank 0: its sync was set up
    before, as in a second fit), where leaving would leave rank 1 waiting for the watchdog."""
    done, took, said = _telling(tmp_path, "finally", "untold")
    untold = f"{CUT_SHORT}; the others were not told"
    assert untold in done.stderr, said[-3000:]
    assert "rank 0: KeyboardInterrupt; aborting the MPI job" in done.stderr, said[-3000:]
    assert "could not set up: ValueError" not in done.stderr.replace(untold, ""), said[-3000:]
    assert done.returncode == 130, said[-3000:]  # MPI_Abort's
    assert took < 20, f"took {took:.1f} s"


#: what the told error's note begins with
TOLD = "the other ranks were told of this error"


def _telling(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, float, str]:
    """Run :data:`INTERRUPTED_TELLING` with ``args`` on 2 ranks: what ``mpiexec`` returned, the
    seconds it took, and its stdout and stderr together (for the assertions' messages)."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED_TELLING)
    began = time.monotonic()
    done = run_mpi(["-n", "2", sys.executable, str(script), *args], timeout=30)
    return done, time.monotonic() - began, done.stdout + done.stderr


def refused_note(calm: bool, refused: str) -> str:
    """What rank 0 raised, as its script prints it, where its failure's check was only
    refused (``refused``: those words): the error's own note (``calm``), or the note on the
    Ctrl-C raised in the error's place."""
    if calm:
        return f"ValueError: no checkpoint here | {refused}"
    return f"KeyboardInterrupt:  | {CUT_SHORT}; {refused}"


#: what each rank raises where rank 0's ``fail_setup`` meets rank 1 at a barrier
AT_THE_BARRIER = (
    "ranks are at different points of the job (rank 0: comparing the job (setup's check) "
    "after 0 steps, rank 1: at the barrier after 0 steps)"
)


@pytest.mark.parametrize("calm", [False, True], ids=["ctrl-c", "no-ctrl-c"])
def test_a_failure_met_by_a_rank_at_a_meeting_says_the_others_were_only_refused(tmp_path, calm):
    """Rank 0's fit fails before its setup while rank 1, past a first setup, waits at a
    barrier: ``fail_setup``'s exchange (setup's check) meets rank 1's barrier, and both are
    refused there as at different points of the job. Rank 1 raises that at once, not rank 0's
    error. Rank 0's error said ``telling the other ranks`` all the same, and a Ctrl-C held in
    the exchange ``the others were not told`` alone, as where they wait: each now says that
    they were only refused where they were, and where each rank was. Rank 0's close aborts
    the job (its setup left open), which no rank waits for."""
    done, took, said = _telling(tmp_path, "barrier", "first", *(["calm"] if calm else []))
    refused = f"the others were not told, only refused where they were: {AT_THE_BARRIER}"
    assert f"rank 0 raised {refused_note(calm, refused)}" in done.stdout, said[-3000:]
    assert f"rank 1 raised SyncError: {AT_THE_BARRIER}" in done.stdout, said[-3000:]
    assert TOLD not in said, said[-3000:]
    closed = "sync closed in the middle of setup (it failed); aborting the MPI job"
    assert f"rank 0: SyncError: {closed}" in done.stderr, said[-3000:]
    assert done.returncode == 1, said[-3000:]  # MPI_Abort's
    assert took < 20, f"took {took:.1f} s"


@pytest.mark.parametrize("first", [False, True], ids=["never-set-up", "set-up-before"])
def test_a_told_ctrl_c_ends_a_rank_that_sets_up_again(tmp_path, first):
    """Rank 1, told only that rank 0 could not set up, sets up again (the way on after a failed
    setup), while rank 0's Ctrl-C, in ``fail_setup``'s exchange, ends its script: its close, in
    a ``finally``, left the job where no setup had succeeded (no last exchange then), and rank 1
    waited in its job check until the watchdog's timeout (600 s by default). It aborts there
    now, at once; where a setup succeeded before, it leaves, and its last exchange refuses
    rank 1's setup made again, at once too."""
    done, took, said = _telling(tmp_path, "finally", "retry", *(["first"] if first else []))
    assert TOLD_AND_INTERRUPTED in done.stderr, said[-3000:]
    assert "waited" not in said, said[-3000:]  # the watchdog's words
    if first:
        assert "a rank closed its sync while another went on" in done.stderr, said[-3000:]
    else:
        assert "rank 0: KeyboardInterrupt; aborting the MPI job" in done.stderr, said[-3000:]
        assert done.returncode == 130, said[-3000:]  # MPI_Abort's
    assert took < 20, f"took {took:.1f} s"


#: ``python AFTER_TELLING HOW``: both ranks set up (a first fit), then rank 0's second fit fails
#: before its setup (a ValueError, caught as ``Trainer.fit`` does), which it tells rank 1
#: (``tell_setup_failed``), whose second setup raises a JobMismatch; each closes in a
#: ``finally`` inside ``run_main``. Rank 0 ends on something raised while its told error
#: propagates: ``interrupted``, a Ctrl-C once it was told; ``twice``, a second Ctrl-C as the
#: one held in the exchange propagates; ``wrapped``, the script's own error raised from it
AFTER_TELLING = """\
import os
import signal
import sys
import numpy as np
from distconv.distributed import run_main
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import tell_setup_failed
from distconv.sync.mpi import MPISync

how = sys.argv[1]
sync = MPISync(create_optimizer("sgd"), timeout=40)
sync.setup([Parameter("w", np.ones(3))], {})
exchange = sync._fail_before_check


def interrupted(error):
    os.kill(os.getpid(), signal.SIGINT)
    exchange(error)


if how == "twice":
    sync._fail_before_check = interrupted


def fit():
    if sync.rank != 0:
        sync.setup([Parameter("w", np.ones(3))], {})
        return
    try:
        raise ValueError("no checkpoint here")
    except ValueError as exc:
        try:
            tell_setup_failed(sync, exc)
        except KeyboardInterrupt:
            os.kill(os.getpid(), signal.SIGINT)
        if how == "interrupted":
            os.kill(os.getpid(), signal.SIGINT)
        if how == "wrapped":
            raise RuntimeError("the fit failed") from exc
        raise


def closing():
    try:
        fit()
    finally:
        sync.close()


run_main(closing)
"""


@pytest.mark.parametrize("how", ["interrupted", "twice", "wrapped"])
def test_what_ends_a_told_failure_leaves_the_job(tmp_path, how):
    """Rank 0 told rank 1 that it could not set up, then ended on something raised as that
    error propagated: a Ctrl-C (after the exchange, or a second one), or an error of its own
    raised from it. Its close aborted the job, none waiting (a setup succeeded before: its last
    exchange meets rank 1's), and rank 1, killed in its own last exchange, never said its
    line. Each now says its own ending, no abort; after a second Ctrl-C, ``run_main`` says the
    first one's note too, where it said ``interrupted`` alone."""
    script = tmp_path / "after.py"
    script.write_text(AFTER_TELLING)
    done = run_mpi(["-n", "2", sys.executable, str(script), how], timeout=30)
    said = done.stdout + done.stderr
    assert not any(abort in said for abort in ABORTS), said[-3000:]
    assert "after.py: error: rank 0 could not set up: ValueError" in done.stderr, said[-3000:]
    if how == "wrapped":
        assert "RuntimeError: the fit failed" in done.stderr, said[-3000:]
        assert done.returncode == 1, said[-3000:]
    else:
        assert "after.py: interrupted" in done.stderr, said[-3000:]
        assert done.returncode == 130 | 1, said[-3000:]  # rank 0's and rank 1's, ORed
    if how == "twice":  # the first Ctrl-C's note, on the second's context, said after it
        ended = ["after.py: interrupted", f"after.py: {TOLD_AND_INTERRUPTED}"]
        lines = done.stderr.splitlines()  # one write (messages.say): together
        assert any(lines[i : i + 2] == ended for i in range(len(lines))), said[-3000:]
