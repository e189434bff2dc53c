"""``distconv-launch mpi`` names a rank's signal, which mpiexec's status alone cannot say: Hydra
exits 9 both for a rank's SIGKILL and for a rank's exit(9)."""

from __future__ import annotations

import json
import time

import pytest

from launcher.mpi_exit import signal_cause
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip

#: mpiexec's (Hydra's) own line when a rank dies of a signal
HYDRA_LINE = "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)"
#: seconds rank 0 waits for Hydra's cleanup to SIGKILL it: well inside the launch's timeout
#: (30 s), as Hydra 5.0.2 now and then, under load, misses that cleanup (the proxy reaps rank
#: 1 and leaves rank 0 running), and rank 0 then ends its wait itself, exiting 0
RANK_0_WAITS = 8
#: rank 1 ends as argv[1] says: "kill N" (the signal N), "exit N" (os._exit(N)) or "quote N"
#: (prints HYDRA_LINE, as a log quoting an earlier run would, then os._exit(N)); rank 0 waits,
#: ignoring SIGUSR1 (Hydra's signal where its cleanup is off: a missed cleanup's stand-in)
ENDING = f"""import os, signal, sys, time
from mpi4py import MPI
how, number = sys.argv[1], int(sys.argv[2])
if MPI.COMM_WORLD.Get_rank() == 1:
    if how == "quote":
        print("{HYDRA_LINE}", flush=True)
    os.kill(os.getpid(), number) if how == "kill" else os._exit(number)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
time.sleep({RANK_0_WAITS})
os._exit(0)  # not MPI_Finalize (mpi4py's, at exit): it would wait for rank 1, gone, for good
"""
#: an mpiexec whose cleanup never comes: Hydra with -disable-auto-cleanup
NO_CLEANUP = """#!/bin/sh
exec {mpiexec} -disable-auto-cleanup "$@"
"""


def _run(tmp_path, how: str, number: int, *more: str):
    mpiexec_or_skip()
    script = tmp_path / "ending.py"
    script.write_text(ENDING)
    run = tmp_path / "run"
    argv = ["mpi", "-np", "2", "--threads", "1", "--run-dir", str(run), *more, "--", str(script)]
    done = launch(*argv, how, str(number), cwd=tmp_path, timeout=30)  # runs in ~1 s
    return done, json.loads((run / "failure.json").read_text())


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_rank_killed_by_a_signal_is_named_with_its_signal(tmp_path):
    done, report = _run(tmp_path, "kill", 9)
    assert done.returncode != 0
    said = "died of signal 9 (SIGKILL), as mpiexec says"
    # the rank leads: mpiexec did not die of that signal (the statuses name rank 1, one host)
    headline = [line for line in done.stderr.splitlines() if "(under mpiexec 0)" in line]
    assert len(headline) == 1 and said in headline[0], done.stderr
    assert said in report["cause"]


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["exit", "quote"])
def test_a_rank_that_exits_9_is_no_signal(tmp_path, how):
    """Also where the rank's own last line reads as mpiexec's of a signal: it is the rank's."""
    done, report = _run(tmp_path, how, 9)
    assert done.returncode == 9, done.stderr
    assert "mpiexec 0 failed with exit code 9 (after 0 restart(s))" in done.stderr, done.stderr
    assert "died of signal" not in done.stderr and report["cause"] is None, done.stderr


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_rank_that_exits_9_where_hydra_misses_its_cleanup(tmp_path):
    """Hydra now and then leaves the other rank running after a rank's exit(9): it then ends
    its wait itself, inside the launch's timeout, and the statuses read 0,2304 (rank 1's own)."""
    wrapper = tmp_path / "mpiexec"
    wrapper.write_text(NO_CLEANUP.format(mpiexec=mpiexec_or_skip()))
    wrapper.chmod(0o755)
    started = time.monotonic()
    done, report = _run(tmp_path, "exit", 9, "--mpiexec", str(wrapper), "--mpi-flavor", "mpich")
    assert time.monotonic() - started >= RANK_0_WAITS  # rank 0 was not cleaned up
    assert done.returncode == 9, done.stderr
    codes = [line for line in report["tail"] if "] Exit codes: [" in line]
    assert len(codes) == 1 and codes[0].endswith("] 0,2304"), report["tail"]
    assert "died of signal" not in done.stderr and report["cause"] is None, done.stderr


def test_the_signal_is_read_from_either_mpis_last_lines():
    hydra = "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)"
    openmpi = (
        "mpirun noticed that process rank 1 with PID 4242 on node a exited on signal 6 (Aborted)."
    )
    assert signal_cause(["[0] x", hydra, "Please see the FAQ"]) == (
        "a rank died of signal 11 (SIGSEGV), as mpiexec says"
    )
    assert signal_cause([openmpi, "---"]) == "rank 1 died of signal 6 (SIGABRT), as mpiexec says"
    assert signal_cause(["[1] Abort(9) on node 1 (rank 1 in comm 0)"]) is None
    # Open MPI 5 (prterun) wraps the sentence after "exited on"; mpirun's own code is 9 too
    wrapped = ["prterun noticed that process rank 1 with PID 4242 on node a exited on"]
    wrapped += ["signal 6 (Aborted).", "-----"]
    assert signal_cause(wrapped) == "rank 1 died of signal 6 (SIGABRT), as mpiexec says"
    assert signal_cause(["[1,1]<stderr>:" + wrapped[0], wrapped[1]]) is None  # a rank's line


@pytest.mark.parametrize("tag", ["", "[1] "], ids=["mpiexec", "rank"])
def test_an_older_hydras_line_without_your_is_read_too(tag):
    """Older Hydras (MPICH2's, an older Intel MPI's) print the line without ``YOUR``, which
    was read before its match was anchored; a rank's own such line still comes behind its tag."""
    line = tag + "APPLICATION TERMINATED WITH THE EXIT STRING: Hangup (signal 1)"
    said = "a rank died of signal 1 (SIGHUP), as mpiexec says"
    assert signal_cause([line]) == (None if tag else said)


@pytest.mark.parametrize(
    "line",
    [
        f"[1] {HYDRA_LINE}",  # Hydra's -prepend-rank
        f"[1,1]<stderr>:{HYDRA_LINE}",  # Open MPI's --tag-output
        "[1,1]<stdout>:mpirun noticed that process rank 0 with PID 7 on node a exited on signal 9",
        '[1] {"level": "info", "message": "last try: ' + HYDRA_LINE + '", "rank": 1}',  # JSON
    ],
    ids=["hydra-tag", "openmpi-tag", "openmpi-line-quoted", "json-line"],
)
def test_a_ranks_own_line_is_not_mpiexecs(line):
    """Every line of a rank comes behind its MPI tag; only mpiexec's own, bare lines count."""
    assert signal_cause(["[0] step 3", line, "[0] step 4"]) is None


#: Hydra's banner where rank 1 exited 9 and rank 0 was SIGKILLed by Hydra's cleanup before its
#: status went in (a fresh-clone CI run's, with its -print-all-exitcodes line: statuses 9, 2304)
EXIT_9_THEN_CLEANUP = [
    "===================================================================================",
    "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
    "=   PID 13406 RUNNING AT vm",
    "=   EXIT CODE: 9",
    "=   CLEANING UP REMAINING PROCESSES",
    "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES",
    "===================================================================================",
    "[mpiexec@vm] Exit codes: [vm] 9,2304",
    HYDRA_LINE,
    "This typically refers to a problem with your application.",
    "Please see the FAQ page for debugging suggestions",
]


def test_a_ranks_exit_9_beside_hydras_cleanup_sigkill_is_no_signal():
    """Hydra's banner ORs every process's status: rank 1's exit(9) (9 << 8) with the SIGKILL
    (9) it ends rank 0 with read "Killed (signal 9)", under load now and then; each process's
    own status (-print-all-exitcodes) says rank 1 exited 9 and the SIGKILL was the cleanup's."""
    assert signal_cause(EXIT_9_THEN_CLEANUP) is None


@pytest.mark.parametrize(
    ("codes", "said"),
    [
        ("[vm] 0,9", "signal 9 (SIGKILL)"),  # rank 1 SIGKILLed (an OOM kill)
        ("[vm] 9,9", "signal 9 (SIGKILL)"),  # and rank 0 by the cleanup
        ("[vm] 9,6", "signal 6 (SIGABRT)"),  # the OR said 15 (SIGTERM)
        ("[vm] 9,2304,11", "signal 11 (SIGSEGV)"),  # a rank's own signal beside an exit
        ("[vm] 0,768", None),  # exit(3)
        ("[vm] 9,768", None),  # exit(3) and the cleanup's SIGKILL: the OR said signal 9
        ("[a] 0,0\n[b] 9,2304", None),  # one line per further host
        ("[a] 0,0\n[b] 0,0\n[c] 0,134", "signal 6 (SIGABRT)"),  # a core dump's bit
    ],
)
def test_each_processs_own_status_says_whether_a_rank_died_of_a_signal(codes, said):
    """Where Hydra's -print-all-exitcodes line is there, it alone is read (its banner line,
    HYDRA_LINE here, is the statuses' OR); a SIGKILL beside a rank's own non-zero exit is the
    cleanup's."""
    first, *more = codes.split("\n")
    tail = ["[0] step 3", f"[mpiexec@a] Exit codes: {first}", *more, HYDRA_LINE]
    expected = None if said is None else f"a rank died of {said}, as mpiexec says"
    assert signal_cause(tail) == expected
