"""A rank that ends the MPI job says why in one line (``distconv.sync.mpi.leaving.reason``):
``failure.json``'s ``cause`` names that line, where mpiexec's status says only the Abort's code
or signal 9 (``launcher.rank_reason``, ``launcher.mpi_exit.said_by_rank``)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import warnings

import pytest

from distconv.logs import configure_logging
from distconv.rank_endings import ENDINGS
from distconv.runtime import Runtime
from distconv.sync.base import SyncError
from distconv.sync.mpi.leaving import reason
from launcher.mpi_exit import mpiexec_tail
from launcher.rank_reason import rank_reason
from tests.launcher.launch_cli import ENV, launch
from tests.launcher.real_children import mpiexec_or_skip

#: rank 1 ends the job as argv[1] says, through the sync's own functions: "abort"
#: (leaving.abort_job: its line, then MPI_Abort) or "stall" (the watchdog's stop where MPI
#: allows no second thread to abort: its line, then the SIGKILL of itself); argv[2] "json":
#: under --log-format json. Rank 0 waits to be ended, at most 8 s (Hydra now and then misses
#: its cleanup), then exits 0 without MPI_Finalize, which would wait for the gone rank 1.
ENDING = """import os, sys, time
from mpi4py import MPI
from distconv.logs import configure_logging
from distconv.runtime import Runtime
from distconv.sync.base import SyncError
from distconv.sync.mpi.leaving import abort_job
from distconv.sync.mpi.watchdog import abort_on_stall
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
if "json" in sys.argv:
    configure_logging(Runtime(rank=rank, world_size=2), fmt="json")
if rank == 1:
    print("rank 1: SyncError: a decoy; ending this rank, said at rank 0's line", flush=True)
    if sys.argv[1] == "abort":
        abort_job(comm, rank, SyncError("step 3 differs; ranks disagree."))
    abort_on_stall(comm, rank, None)("stalled 30 s in allreduce")
time.sleep(8)
os._exit(0)
"""


def _launch(tmp_path, how: str, fmt: str):
    mpiexec_or_skip()
    script = tmp_path / "ending.py"
    script.write_text(ENDING)
    run = tmp_path / "run"
    argv = ["mpi", "-np", "2", "--threads", "1", "--run-dir", str(run), "--", str(script)]
    more = ["--log-format", "json"] if fmt == "json" else []
    done = launch(*argv, how, fmt, *more, cwd=tmp_path, timeout=30)  # runs in ~1 s
    return done, json.loads((run / "failure.json").read_text())


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_rank_that_aborts_the_job_is_named_as_the_cause(tmp_path, fmt):
    done, report = _launch(tmp_path, "abort", fmt)
    assert done.returncode == 1, done.stderr  # the Abort's status: it alone said nothing
    said = "rank 1 ended the job: SyncError: step 3 differs; ranks disagree"
    assert report["cause"] == said, report
    assert f"mpiexec 0 failed with exit code 1: {said}" in done.stderr, done.stderr


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_rank_that_ends_itself_is_named_as_the_cause(tmp_path, fmt):
    done, report = _launch(tmp_path, "stall", fmt)
    assert done.returncode == 128 + 9, done.stderr
    said = "rank 1 ended itself (SIGKILL) after: SyncError: stalled 30 s in allreduce"
    assert report["cause"].startswith(said), report  # not "a rank died of signal 9 (SIGKILL)"
    assert "died of signal" not in report["cause"], report


def _json_reason(rank: int, error: BaseException, ending: str) -> str:
    """:func:`reason`'s line under ``--log-format json``, the root logger left as it was: its
    handlers, its level (the JSON configuration sets INFO) and Python's warnings (it captures
    them into the log, where they stayed for the rest of the worker's tests)."""
    root = logging.getLogger()
    handlers, level, shown = root.handlers[:], root.level, warnings.showwarning
    try:
        configure_logging(Runtime(rank=rank, world_size=2), fmt="json")
        return reason(rank, error, ending).rstrip("\n")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        if warnings.showwarning is not shown:  # captured here, not before
            logging.captureWarnings(False)


def test_a_json_reason_leaves_the_root_logger_and_warnings_as_they_were():
    root = logging.getLogger()
    handlers, level, shown = root.handlers[:], root.level, warnings.showwarning
    _json_reason(1, SyncError("stalled"), ENDINGS[0])
    assert (root.handlers, root.level) == (handlers, level)  # the level was left at INFO
    assert warnings.showwarning is shown  # was logging's: warnings captured into the log


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("tag", ["[1] ", "[1,1]<stderr>:", "[1,1]<stderr>: "])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_syncs_reason_is_read_behind_its_tag(ending, tag, fmt):
    """The sync's own line, each ending, each MPI's tag (Hydra's, Open MPI 4's, Open MPI 5's
    with its space, which hid the line), text and JSON; the error's message may hold "; " and
    a full stop (reason drops it), or be empty."""
    for error, why in [
        (SyncError("step 3 differs; ranks disagree."), "SyncError: step 3 differs; ranks disagree"),
        (KeyboardInterrupt(), "KeyboardInterrupt"),
    ]:
        line = _json_reason(1, error, ending) if fmt == "json" else reason(1, error, ending)
        tail = ["[0] step 1", tag + line.rstrip("\n"), "[1] Abort(1) on node 1"]
        assert rank_reason(tail) == (1, why), tail


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_json_reason_whose_message_spans_lines_is_read(ending):
    """Under --log-format json the line is one JSON object, whatever its message holds: an
    error of several lines (mpi4py's ``Other MPI error, error stack:`` and the stack, an
    uncaught one that install_abort_hook's abort_job names) is read whole, not dropped."""
    error = Exception("Other MPI error, error stack:\nMPIR_Bcast_impl(457): message sizes")
    tail = ["[0] step 1", "[1] " + _json_reason(1, error, ending)]
    assert rank_reason(tail) == (1, f"Exception: {error}"), tail


def test_a_line_nested_past_jsons_depth_is_no_reason():
    """A rank's line that opens like a JSON object but nests past ``json.loads``' recursion (a
    RecursionError, no ValueError) is no reason: the reason before it is still read."""
    tail = ["[1] " + _json_reason(1, SyncError("stalled"), ENDINGS[0]), '[1] {"a": ' + "[" * 5000]
    assert rank_reason(tail) == (1, "SyncError: stalled"), tail


@pytest.mark.parametrize(
    "line",
    [
        "rank 1: SyncError: x; aborting the MPI job",  # no tag: not a rank's line
        "[0] rank 1: SyncError: x; aborting the MPI job",  # rank 0 quoting rank 1's
        "[1] rank 1: SyncError: x; aborting the MPI job, as rank 0 did",
        "[1] rank 1: we are ending this rank",
        "[1] rank 1: 3 errors: x; ending this rank",  # no error's name
        "[1] note: rank 1: SyncError: x; ending this rank",
        '[1] {"level":"info","logger":"distconv","message":"rank 1: E: x; ending this rank"}',
        '[1] {"level":"error","logger":"app","message":"rank 1: E: x; ending this rank"}',
        '[1] {"level":"error","logger":"distconv","message":"rank 1: E: x; ending',
    ],
)
def test_a_ranks_other_output_is_not_taken_for_its_reason(line):
    assert rank_reason(["[0] step 1", line]) is None


def test_the_last_reason_is_the_cause_and_a_sigkill_is_the_ranks_own():
    tail = [
        "[0] rank 0: SyncError: first; aborting the MPI job",
        "[1] rank 1: SyncError: stalled 30 s in allreduce; ending this rank",
        "[mpiexec@vm] Exit codes: [vm] 0,9",
    ]
    status, cause = mpiexec_tail.read(tail, 9)
    assert status == -9
    assert cause == (
        "rank 1 ended itself (SIGKILL) after: SyncError: stalled 30 s in allreduce; "
        "mpiexec itself exited with code 9"
    )
    assert mpiexec_tail.read(tail[:1], 1) == (1, "rank 0 ended the job: SyncError: first")
    assert mpiexec_tail.read(["[0] step 1"], 1) == (1, None)  # no reason: as before


#: rank 1 ends itself as argv[1] says, through the sync's own functions, without MPI: "abort"
#: (leaving.abort_job, an Abort that returns: then its _exit) or "stall" (the watchdog's stop
#: where no second thread may abort: its line, then the SIGKILL of itself)
ENDING_WITHOUT_MPI = """import sys
from distconv.sync.base import SyncError
from distconv.sync.mpi.leaving import abort_job
from distconv.sync.mpi.watchdog import abort_on_stall
class Comm:
    def Abort(self, status):
        pass
if sys.argv[1] == "abort":
    abort_job(Comm(), 1, SyncError("step 3 differs"))
abort_on_stall(Comm(), 1, None)("stalled 30 s in allreduce")
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("how", "why"),
    [("abort", "SyncError: step 3 differs"), ("stall", "SyncError: stalled 30 s in allreduce")],
)
def test_the_syncs_own_endings_are_read_without_mpi(tmp_path, how, why):
    """abort_job's and the watchdog's own lines, each with its ending, as a rank prints them
    (here without MPI, so that no change of their wording goes unseen where mpiexec is not
    installed: the real runs above skip there), are read behind the rank's tag."""
    script = tmp_path / "ending.py"
    script.write_text(ENDING_WITHOUT_MPI)
    done = subprocess.run(
        [sys.executable, str(script), how], env=ENV, capture_output=True, text=True, timeout=30
    )
    assert done.returncode in (1, -9), done  # abort_job's _exit(1), the stall's SIGKILL
    tail = ["[1] " + line for line in done.stderr.splitlines()]
    assert rank_reason(tail) == (1, why), done.stderr


def test_a_reason_with_an_ending_the_launcher_does_not_read_is_refused():
    """The sync's line takes its ending from the one list the launcher reads
    (:mod:`distconv.rank_endings`): one of another wording would silently drop the rank's
    reason from failure.json's cause, so it is refused where it is written."""
    with pytest.raises(ValueError, match="ending the rank"):
        reason(1, SyncError("stalled"), "ending the rank")
