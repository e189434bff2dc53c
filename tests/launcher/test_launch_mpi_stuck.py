"""``distconv-launch mpi`` stops an mpiexec that has reported its ranks' end but never exits.

MPICH's Hydra now and then, under load, stays alive after a rank's failure (seen once in ~25
runs of ``test_launch_mpi_signal``): the launcher waited on it for good. A hanging Hydra cannot
be produced on demand, so a stand-in ``mpiexec`` prints what Hydra prints at a rank's failure
(its banner, its ``-print-all-exitcodes`` line) and then sleeps; the launcher must stop it
after :data:`launcher.child.WRAPUP_SECONDS` (:data:`WRAPUP` here), say so in one line, and
exit with the failing rank's own status.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.mpi_exit import mpiexec_reader, mpiexec_tail, reports_end
from launcher.wrapup import reported_before
from tests.launcher.launch_cli import ENV, launch, wait_while_running
from tests.processes import job_env, job_left

#: the launcher's WRAPUP_SECONDS in these tests (the product's 10 s, six times, cost CI a minute)
WRAPUP = 2.0
#: Hydra's end of a job whose rank 1 exited 9
FAILED = """
echo "==================================================================================="
echo "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
echo "=   EXIT CODE: 9"
echo "==================================================================================="
echo "[mpiexec@vm] Exit codes: [vm] 0,2304"
"""
#: mpiexec's ``{end}`` (what Hydra prints), then a process that never exits; ``{trap}`` makes
#: its group ignore SIGTERM (then only the SIGKILL after the grace ends it)
STUCK_HYDRA = """#!/bin/sh
{trap}
{end}
sleep 60 &
wait
"""


def _stuck_launch(
    tmp_path: Path, trap: str, *more: str, end: str = FAILED, flavor: str = "mpich", np: int = 2
):
    fake = tmp_path / "mpiexec"
    fake.write_text(STUCK_HYDRA.format(trap=trap, end=end))
    fake.chmod(0o755)
    script = tmp_path / "job.py"
    script.write_text("print('never run')\n")
    run = tmp_path / "run"
    argv = ["mpi", "-np", str(np), "--mpiexec", str(fake), "--mpi-flavor", flavor]
    started = time.monotonic()
    argv += ["--run-dir", str(run), *more, "--", str(script)]
    done = launch(*argv, cwd=tmp_path, timeout=30, child_waits={"WRAPUP_SECONDS": WRAPUP})
    return done, time.monotonic() - started, run


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("trap", "grace"), [("", "30"), ("trap '' TERM", "1")], ids=["sigterm", "sigkill"]
)
def test_an_mpiexec_that_reported_the_end_but_stays_is_stopped(tmp_path, trap, grace):
    done, took, run = _stuck_launch(tmp_path, trap, "--grace", grace)
    assert WRAPUP <= took < WRAPUP + float(grace) + 10, took
    assert done.returncode == 9, done.stderr  # rank 1's own exit(9), from Hydra's statuses
    said = [line for line in done.stderr.splitlines() if "did not exit" in line]
    assert len(said) == 1, done.stderr
    assert f"mpiexec 0 did not exit {WRAPUP:g} s after" in said[0]
    assert "[mpiexec@vm] Exit codes: [vm] 0,2304" in said[0], said
    assert "mpiexec 0 failed with exit code 9" in done.stderr, done.stderr
    report = json.loads((run / "failure.json").read_text())
    assert report["exit_code"] == 9 and "a rank exited with code 9" in report["cause"], report
    assert job_left(done.env, 5) == {}  # the stand-in's sleep went with its group


@pytest.mark.timeout(60)
def test_an_mpiexec_that_reported_every_ranks_success_but_stays_ends_a_job_that_succeeded(
    tmp_path,
):
    """All ranks exited 0, as Hydra's statuses say: stopping the mpiexec that stays after them
    fails nothing (it was reported as failing with signal SIGTERM, exit 143)."""
    end = 'echo "[mpiexec@vm] Exit codes: [vm] 0,0"'
    done, took, run = _stuck_launch(tmp_path, "", "--grace", "5", end=end)
    assert WRAPUP <= took < WRAPUP + 15, took
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "did not exit" in line]
    assert len(said) == 1 and said[0].endswith("every rank had exited 0, so the attempt succeeded")
    assert "failed" not in done.stderr and not (run / "failure.json").exists(), done.stderr
    assert job_left(done.env, 5) == {}


@pytest.mark.timeout(60)
def test_a_success_reported_for_only_some_ranks_is_no_success(tmp_path):
    """Hydra's statuses of 2 of the job's 4 ranks, all 0 (the line of a second host not
    there: Hydra stopped before it, or it never came): the other host's ranks may have
    failed, so the attempt did not succeed (it was reported as succeeded, exit 0)."""
    end = 'echo "[mpiexec@a] Exit codes: [a] 0,0"'
    done, took, run = _stuck_launch(tmp_path, "", "--grace", "5", end=end, np=4)
    assert WRAPUP <= took < WRAPUP + 15, took
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "so the attempt succeeded" not in done.stderr, done.stderr
    report = json.loads((run / "failure.json").read_text())
    assert report["signal"] == "SIGTERM", report
    assert job_left(done.env, 5) == {}


def test_a_success_needs_a_status_for_each_of_a_known_number_of_ranks():
    """All-zero statuses are a success only for a job of that many ranks; where the number is
    unknown (:data:`mpiexec_tail`, which knows no job) they never are: that they are all of the
    job's cannot be known (it took them for a success)."""
    tail = ["[mpiexec@a] Exit codes: [a] 0,0", "[b] 0,0"]
    assert mpiexec_reader(4).succeeded(tail)
    assert not mpiexec_reader(6).succeeded(tail)  # a third host's line not there
    assert not mpiexec_reader(4).succeeded(tail[:1])
    assert not mpiexec_tail.succeeded(tail)


#: Open MPI's sentence that rank 1 died of SIGKILL: Open MPI 4's one line, and Open MPI 5's
#: (prterun's), which its help text wraps after "exited on"
NOTICED = {
    "openmpi4": [
        "mpirun noticed that process rank 1 with PID 7 on node a exited on signal 9 (Killed)."
    ],
    "openmpi5": [
        "prterun noticed that process rank 1 with PID 1617008 on node cpu155 exited on",
        "signal 9 (Killed).",
    ],
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", NOTICED)
def test_a_stopped_mpirun_reports_the_ranks_signal_open_mpi_noticed(tmp_path, version):
    """Open MPI's mpirun that stays after its ``noticed`` line: the report's status is the
    rank's signal, as the line says, not the launcher's SIGTERM to mpirun (exit 143). Open MPI
    5's sentence over two lines started no wrap-up (the launcher waited on mpirun for good)."""
    end = "\n".join(f'echo "{line}"' for line in [*NOTICED[version], "-----"])
    done, took, run = _stuck_launch(tmp_path, "", "--grace", "5", end=end, flavor="openmpi")
    assert WRAPUP <= took < WRAPUP + 15, took
    assert done.returncode == 128 + 9, done.stderr
    report = json.loads((run / "failure.json").read_text())
    assert report["signal"] == "SIGKILL", report
    assert report["cause"] == (
        "rank 1 died of signal 9 (SIGKILL), as mpiexec says; mpiexec itself died of signal SIGTERM"
    ), report
    assert job_left(done.env, 5) == {}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ranks", ["failed", "succeeded"])
@pytest.mark.parametrize("to", ["launcher", "everyone"])
def test_a_stop_signal_in_the_wrapup_keeps_the_end_mpiexec_reported(tmp_path, ranks, to):
    """SIGTERM to the launcher while mpiexec stays after it reported rank 1's exit(9) (the
    documented way out of a Hydra that stays): the attempt's failure came first and is
    reported with the stop (it was lost: "stopped by SIGTERM", no failure.json); after
    all-zero statuses the job had finished. ``everyone``: the SIGTERM reaches mpiexec too, as
    systemd's stop of every process of a service does, so mpiexec ends right after the
    signal, before the launcher looks (that report was lost so still)."""
    fake = tmp_path / "mpiexec"
    end = FAILED if ranks == "failed" else 'echo "[mpiexec@vm] Exit codes: [vm] 0,0"'
    # a line after the report: once it is in the log, the launcher's reader has taken in the
    # report (it logs a line before it reads it), so the SIGTERM cannot come in between
    end += '\necho "after the report"'
    pid = tmp_path / "mpiexec.pid"
    fake.write_text(STUCK_HYDRA.format(trap=f'echo $$ > "{pid}"', end=end))
    fake.chmod(0o755)
    script = tmp_path / "job.py"
    script.write_text("print('never run')\n")
    run = tmp_path / "run"
    argv = ["mpi", "-np", "2", "--mpiexec", str(fake), "--mpi-flavor", "mpich"]
    argv += ["--run-dir", str(run), "--grace", "5", "--", str(script)]
    log = run / "logs" / "mpiexec-0.log"
    with job_env(ENV) as env:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "launcher", *argv], env=env, cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            reported = lambda: log.exists() and "after the report" in log.read_text()  # noqa: E731
            wait_while_running(reported, launcher, "mpiexec's report of the end")
            launcher.send_signal(signal.SIGTERM)
            if to == "everyone":  # the stand-in leads its own group (start_new_session)
                time.sleep(0.02)  # after the launcher's, within its poll (50 ms): either way
                os.killpg(int(pid.read_text()), signal.SIGTERM)
            _, stderr = launcher.communicate(timeout=30)
        finally:
            launcher.kill()
        assert job_left(env, 5) == {}
    assert "did not exit" not in stderr, stderr  # stopped at once, not after the wrap-up
    if ranks == "succeeded":
        assert launcher.returncode == 0, stderr
        assert "got SIGTERM after the job had finished" in stderr, stderr
        assert not (run / "failure.json").exists()
        return
    assert launcher.returncode == 128 + signal.SIGTERM, stderr
    report = json.loads((run / "failure.json").read_text())
    assert report["exit_code"] == 9 and report["then"] == "stopped by SIGTERM", report


@pytest.mark.parametrize(
    ("line", "ends"),
    [
        ("=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", True),
        ("[mpiexec@vm] Exit codes: [vm] 0,0", True),  # a job that succeeded ends so too
        (
            "mpirun noticed that process rank 1 with PID 7 on node a exited on signal 9 (Killed).",
            True,
        ),
        (NOTICED["openmpi5"][0], True),  # Open MPI 5's, wrapped after "exited on"
        ("[1] =   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", False),  # a rank's quote
        ("[1,1]<stderr>:" + NOTICED["openmpi5"][0], False),
        ("[1,1]<stdout>:[mpiexec@vm] Exit codes: [vm] 0,0", False),
        # the banner's last line: the countdown started at its first
        ("YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)", False),
        ("[0] step 3", False),
    ],
)
def test_only_mpiexecs_own_report_of_the_end_starts_its_wrapup(line, ends):
    """A rank's line that quotes such a report (behind its tag) must not start the countdown
    to stopping a job that is still running."""
    assert reports_end(line) is ends


class _Ended:
    """A child as reported_before sees it: reported its end at 1.0, exited at ``exited_at``."""

    def __init__(self, exited_at: float | None, status: int | None, success: bool):
        self.exited_at, self.reported_end = exited_at, (1.0, "[mpiexec@vm] Exit codes: ...")
        self._status, self._success = status, success

    def poll(self) -> int | None:
        return None if self.exited_at is None else self._status

    def reported_success(self) -> bool:
        return self._success


@pytest.mark.parametrize("success", [False, True], ids=["failed", "succeeded"])
@pytest.mark.parametrize("exited_at", [None, 2.0, 2.5], ids=["running", "at", "after"])
def test_a_report_before_the_signal_stands_though_mpiexec_ended_after_it(success, exited_at):
    """The signal at 2.0 came after the report (1.0): whether mpiexec still runs or ended at
    the signal or since (the same stop reached it), its report is the attempt's end."""
    child = _Ended(exited_at, -signal.SIGTERM, success)
    assert reported_before([child], 2.0) == ((None, True) if success else (child, False))
    assert reported_before([_Ended(1.5, 9, success)], 2.0) == (None, False)  # ended before
