"""Under MPICH's Hydra the launcher's exit status and ``failure.json``'s ``exit_code`` are the
failing rank's own, read from ``-print-all-exitcodes``'s lines, not mpiexec's merged status:
when rank 1 exits 3 and Hydra's cleanup SIGKILLs another rank, Hydra ORs the wait statuses and
exits 9, and the launcher exited 9 ("mpiexec 0 failed with exit code 9"), 3 runs in 6 with 3
ranks. The status lines here are Hydra 5.0.2's own (several hosts: ``-launcher fork``)."""

from __future__ import annotations

import json
import time

import pytest

from launcher.child import ChildSpec
from launcher.mpi_exit import mpiexec_tail, rank_status
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip, run_to_exit

#: the banner line Hydra prints below its status lines (the statuses' OR: not to be read)
BANNER = "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)"


def _tail(*codes: str) -> list[str]:
    """mpiexec's last lines: a rank's line, Hydra's status line and one per further host."""
    first, *more = codes
    return ["[0] step 3", f"[mpiexec@vm] Exit codes: {first}", *more, BANNER]


EXIT_3 = "a rank exited with code 3"
SIGABRT = "a rank died of signal 6 (SIGABRT), as mpiexec says"
SIGKILL = "a rank died of signal 9 (SIGKILL), as mpiexec says"


def _itself(code: int) -> str:
    return f"; mpiexec itself exited with code {code}"


@pytest.mark.parametrize(
    ("codes", "mpiexec", "expected"),
    [
        # rank 1's exit(3) and the cleanup's SIGKILL of rank 0 or 2: Hydra exited 9
        (["[vm] 9,768,0"], 9, (3, EXIT_3 + _itself(9))),
        (["[vm] 0,768,9"], 9, (3, EXIT_3 + _itself(9))),
        (["[vm] 9,768,9"], 9, (3, EXIT_3 + _itself(9))),  # the cleanup killed both others
        # several hosts, each on its own line: the first rank that exited non-zero counts
        (["[localhost] 9,0", "[127.0.0.1] 768", "[c] 1280,9"], 9, (3, EXIT_3 + _itself(9))),
        # a rank's own SIGABRT beside another's cleanup SIGKILL: Hydra exited 15 (6 | 9)
        (["[vm] 0,6,9"], 15, (-6, SIGABRT + _itself(15))),
        (["[localhost] 0,6"], 6, (-6, SIGABRT + _itself(6))),  # 128 + 6, as under local
        # a lone SIGKILL is a rank's own (no rank failed before it: an OOM kill)
        (["[vm] 0,9,0"], 9, (-9, SIGKILL + _itself(9))),
        (["[vm] 9,9,9"], 9, (-9, SIGKILL + _itself(9))),
        # an exit beside a rank's own signal: the exit is the status, both are said
        (
            ["[vm] 9,2304,11"],
            11,
            (9, "a rank exited with code 9; a rank died of signal 11 (SIGSEGV), as mpiexec "
                "says" + _itself(11)),
        ),
        (["[localhost] 0", "[127.0.0.1] 768"], 3, None),  # mpiexec's status is the rank's
        (["[vm] 9,2304"], 9, None),  # exit(9) with the cleanup's SIGKILL: 9 either way
        (["[vm] 0,0,0"], 7, None),  # all zero: mpiexec's own failure, its status stays
    ],
)  # fmt: skip
def test_the_failing_ranks_own_status_is_read_from_hydras_lines(codes, mpiexec, expected):
    assert mpiexec_tail.ending(_tail(*codes), mpiexec) == expected


@pytest.mark.parametrize(
    "tail",
    [
        [BANNER, "Please see the FAQ page"],  # the status lines cut off: the banner is an OR
        ["mpirun noticed that process rank 1 with PID 7 on node a exited on signal 6 (Aborted)."],
        ["[1] [mpiexec@vm] Exit codes: [vm] 0,768"],  # a rank's own line, behind its tag
        [],
    ],
    ids=["banner-only", "openmpi", "rank-quotes-it", "empty"],
)
def test_without_hydras_status_lines_mpiexecs_status_stays(tail):
    assert mpiexec_tail.ending(tail, 9) is None


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([0, 768, 9], 3),
        ([9, 9], -9),
        ([0, 134], -6),  # a core dump's bit
        ([9, 6, 2304], 9),  # an exit first, a rank's own signal second
        ([0, 0], None),
        ([], None),
    ],
)
def test_rank_status_in_the_terms_of_a_childs_status(statuses, expected):
    assert rank_status(statuses) == expected


def _failure_of(tmp_path, script: str):
    """The Failure of a real child that prints ``script``'s lines as mpiexec would."""
    spec = ChildSpec("mpiexec", 0, ["sh", "-c", script], prefix="", reader=mpiexec_tail)
    return run_to_exit(tmp_path, spec, "mpiexec-0.log").failure(restart=0)


@pytest.mark.timeout(30)
def test_a_childs_failure_carries_the_ranks_exit_code(tmp_path):
    failure = _failure_of(tmp_path, "echo '[mpiexec@vm] Exit codes: [vm] 9,768,0'; exit 9")
    assert (failure.exit_code, failure.signal, failure.status) == (3, None, 3)
    assert failure.describe() == (
        "mpiexec 0 failed with exit code 3: a rank exited with code 3; "
        "mpiexec itself exited with code 9"
    )


@pytest.mark.timeout(30)
def test_a_childs_failure_carries_the_ranks_signal(tmp_path):
    failure = _failure_of(tmp_path, "echo '[mpiexec@vm] Exit codes: [vm] 0,6,9'; exit 15")
    assert (failure.exit_code, failure.signal, failure.signal_number) == (None, "SIGABRT", 6)
    assert failure.status == 128 + 6
    assert failure.cause.endswith("; mpiexec itself exited with code 15")


#: rank 1 exits 3; the others wait to be ended by Hydra's cleanup (SIGKILL)
RANK_1_EXITS_3 = """import os, time
from mpi4py import MPI
if MPI.COMM_WORLD.Get_rank() == 1:
    os._exit(3)
time.sleep(30)
"""
#: runs at most (each 0.3 to 1 s here): Hydra's cleanup SIGKILL goes into its status in about
#: one run in three; where it never does, the fix was not exercised and the test skips, saying
#: so (it passed before, where 8 s of a loaded machine could hold three runs, none merged)
#: (test_mpi_status_merged.py gets the merged status every run, Hydra's cleanup off)
RUNS, SECONDS = 30, 30.0
#: the cause of a run where Hydra's status was the merged one, the case the test is for
MERGED = "a rank exited with code 3; mpiexec itself exited with code 9"


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_the_launcher_exits_with_the_ranks_code_under_hydras_cleanup(tmp_path):
    mpiexec_or_skip()
    script = tmp_path / "exit3.py"
    script.write_text(RANK_1_EXITS_3)
    start = time.monotonic()
    for attempt in range(RUNS):
        run = tmp_path / f"run{attempt}"
        flags = ["--mpi-flavor", "mpich", "--threads", "1", "--run-dir", str(run)]
        done = launch("mpi", "-np", "3", *flags, "--", str(script), cwd=tmp_path, timeout=60)
        report = json.loads((run / "failure.json").read_text())
        assert done.returncode == 3, done.stderr
        assert (report["exit_code"], report["signal"]) == (3, None), report
        assert "mpiexec 0 failed with exit code 3 (after 0 restart(s))" in done.stderr or (
            "mpiexec 0 failed with exit code 3: a rank exited with code 3; mpiexec itself"
            in done.stderr
        ), done.stderr
        assert report["cause"] in (None, MERGED), report
        if report["cause"] == MERGED:  # Hydra exited 9, the launcher 3: the case to see
            return
        if time.monotonic() - start > SECONDS:
            break
    pytest.skip(f"Hydra's merged status did not come up in {attempt + 1} run(s): not exercised")


def _many_hosts_ending(hosts: int) -> str:
    """mpiexec's last lines on ``hosts`` hosts where rank 1 (on the first) exits 3 and the
    cleanup's SIGKILL of rank 0 is in: Hydra's banner, its status block (a line per further
    host) and its signal line, which reads the OR (768 | 9): "Killed (signal 9)"."""
    lines = ["[1] failing on purpose", "=" * 83, "=   BAD TERMINATION OF ONE OF YOUR APPLICATION"]
    lines.append("[mpiexec@node-0] Exit codes: [node-0] 9,768")
    lines += [f"[node-{i}] 9,9" for i in range(1, hosts)]
    lines += [BANNER, "This typically refers to a problem with your application."]
    lines.append("Please see the FAQ page for debugging suggestions")
    return "printf '%s\\n' " + " ".join(f"'{line}'" for line in lines) + "; exit 9"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("hosts", [2, 17, 18, 64])
def test_the_status_block_of_many_hosts_is_read_whole(tmp_path, hosts):
    """A line per host: on 18 hosts the block and the three lines below it passed the 20
    lines kept of mpiexec's output, its first line was lost, and the banner's OR was read: a
    rank's exit(3) beside the cleanup's SIGKILL reported as "a rank died of signal 9" (and
    mpiexec's merged 9 as the status). The report still shows the last 20 lines."""
    failure = _failure_of(tmp_path, _many_hosts_ending(hosts))
    assert (failure.exit_code, failure.signal, failure.status) == (3, None, 3), failure.cause
    assert failure.cause == "a rank exited with code 3; mpiexec itself exited with code 9"
    assert len(failure.tail) == min(20, hosts + 6)
    assert failure.tail[-1] == "Please see the FAQ page for debugging suggestions"


def test_a_status_block_cut_off_is_not_taken_for_the_banners_signal():
    """Where the block's first line is gone (more hosts than the lines kept), the banner below
    it is the statuses' OR: it names no rank's signal, and mpiexec's status stays."""
    tail = [f"[node-{i}] 9,9" for i in range(1, 18)] + [BANNER, "This typically refers"]
    assert mpiexec_tail.cause(tail) is None
    assert mpiexec_tail.ending(tail, 9) is None
