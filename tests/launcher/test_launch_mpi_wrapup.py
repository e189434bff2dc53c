"""``distconv-launch mpi`` after MPICH's real Hydra has reported every rank's end: what happens
to mpiexec then (a signal from elsewhere, the launcher's own output stalled) must not turn a
job whose ranks all exited 0 into a failure, nor stop an mpiexec the launcher itself held up.

Hydra exits right after its ``Exit codes:`` line, so a wrapper around the real ``mpiexec``
(``--mpiexec``) runs the real job, with the real ranks and Hydra's real report, and then does
what a Hydra that stays would: it stays (``sleep``) or prints more.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from launcher.mpi_exit import READ_LINES
from tests.launcher.launch_cli import ENV, launcher_command, wait_while_running
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import job_env, job_left

#: the launcher's WRAPUP_SECONDS in these tests (not the product's 10 s)
WRAPUP = 2.0
#: the real mpiexec, then a Hydra that stays after its report, its pid in ``{pid}``
STAYS = '#!/bin/sh\necho $$ > "{pid}"\n"{mpiexec}" "$@"\n{after}\n'
#: a rank's end: ``{code}``
RANK = "import sys\nsys.exit({code})\n"


def _wrapped_hydra(tmp_path: Path, after: str) -> tuple[Path, Path]:
    """An ``--mpiexec`` running the real one, then ``after`` (shell); and its pid file."""
    pid = tmp_path / "mpiexec.pid"
    wrapper = tmp_path / "mpiexec-stays"
    wrapper.write_text(STAYS.format(pid=pid, mpiexec=mpiexec_or_skip(), after=after))
    wrapper.chmod(0o755)
    return wrapper, pid


def _start(
    tmp_path: Path, wrapper: Path, env: dict, code: int = 0, drain: float = 5.0
) -> subprocess.Popen:
    """The launcher (WRAPUP_SECONDS cut to :data:`WRAPUP`, OUTPUT_DRAIN_SECONDS to ``drain``)
    running a 2-rank job of ranks that exit ``code`` under ``wrapper``; its stdout and stderr
    are pipes the test reads when it wants to."""
    script = tmp_path / "job.py"
    script.write_text(RANK.format(code=code))
    argv = ["mpi", "-np", "2", "--mpiexec", str(wrapper), "--mpi-flavor", "mpich"]
    argv += ["--threads", "1", "--run-dir", str(tmp_path / "run"), "--grace", "5"]
    command = launcher_command(WRAPUP_SECONDS=WRAPUP, OUTPUT_DRAIN_SECONDS=drain)
    return subprocess.Popen(
        [*command, *argv, "--", str(script)],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@contextmanager
def _launched(
    tmp_path: Path, wrapper: Path, code: int = 0, drain: float = 5.0
) -> Iterator[subprocess.Popen]:
    """:func:`_start`'s launcher in a job environment of its own: killed on the way out, then
    found to have left no process of the job behind."""
    with job_env(ENV) as env:
        launcher = _start(tmp_path, wrapper, env, code, drain)
        try:
            yield launcher
        finally:
            launcher.kill()
        assert job_left(env, 5) == {}


#: mpiexec's lines after Hydra's report: more than its tail keeps (:data:`READ_LINES`), then
#: it stays, so the launcher stops it
PAST_THE_TAIL = f'yes "a late line of mpiexec" | head -n {READ_LINES + 100}\nsleep 60 &\nwait'


def _run_past_the_tail(tmp_path: Path, code: int) -> tuple[int, str]:
    """The launcher over 2 ranks that exit ``code`` under a Hydra that prints
    :data:`PAST_THE_TAIL` after its report; its status and stderr, once the job has left
    nothing behind."""
    wrapper, _ = _wrapped_hydra(tmp_path, PAST_THE_TAIL)
    with _launched(tmp_path, wrapper, code=code) as launcher:
        _, stderr = launcher.communicate(timeout=60)
    return launcher.returncode, stderr


def _reported(tmp_path: Path) -> bool:
    """Whether Hydra's ``Exit codes:`` line is in mpiexec's log (the launcher has read it)."""
    log = tmp_path / "run" / "logs" / "mpiexec-0.log"
    return log.exists() and "Exit codes:" in log.read_text()


@pytest.mark.mpi
@pytest.mark.timeout(90)
@pytest.mark.parametrize("then", ["launcher", "none"])
def test_an_mpiexec_killed_after_every_ranks_success_ends_a_job_that_succeeded(tmp_path, then):
    """Hydra reported each rank's 0, then mpiexec died of SIGTERM (a stop that reached it
    before the launcher's own handler ran, as the launcher's waiter saw: ``launcher``; or one
    that reached it alone: ``none``). The job had finished: it was reported as ``mpiexec 0
    failed with signal SIGTERM``, exit 143, with a failure.json."""
    wrapper, pid = _wrapped_hydra(tmp_path, "sleep 60 &\nwait")
    with _launched(tmp_path, wrapper) as launcher:
        wait_while_running(lambda: _reported(tmp_path), launcher, "Hydra's report")
        os.killpg(int(pid.read_text()), signal.SIGTERM)
        if then == "launcher":
            time.sleep(0.02)  # mpiexec ended first, as the launcher saw (its waiter)
            launcher.send_signal(signal.SIGTERM)
        _, stderr = launcher.communicate(timeout=30)
    assert "failed" not in stderr and not (tmp_path / "run" / "failure.json").exists(), stderr
    if then == "none":
        assert launcher.returncode == 0 and "SIGTERM" not in stderr, stderr
        return
    # the SIGTERM came while the launcher ran (said), or once it had ended; or, rarely, once it
    # had given its handlers back at its end (-SIGTERM): never the attempt's failure (143)
    finished = "got SIGTERM after the job had finished" in stderr
    assert launcher.returncode == 0 or (launcher.returncode == -signal.SIGTERM and not finished)


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_an_mpiexec_killed_after_a_ranks_failure_reports_the_ranks_status(tmp_path):
    """The same kill after Hydra reported both ranks' exit(3): the job failed, and the
    report's status is the ranks' 3, not mpiexec's SIGTERM (a success only after all zeros)."""
    wrapper, pid = _wrapped_hydra(tmp_path, "sleep 60 &\nwait")
    with _launched(tmp_path, wrapper, code=3) as launcher:
        wait_while_running(lambda: _reported(tmp_path), launcher, "Hydra's report")
        os.killpg(int(pid.read_text()), signal.SIGTERM)
        _, stderr = launcher.communicate(timeout=30)
    assert launcher.returncode == 3, stderr
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert report["exit_code"] == 3, report
    assert report["cause"] == "a rank exited with code 3; mpiexec itself died of signal SIGTERM"


#: what the wrapper prints after Hydra's report: far more than a pipe holds (64 KiB)
LATE_LINES = 3000
LATE = f'yes "a late line of mpiexec: {"x" * 70}" | head -n {LATE_LINES}'


def _assert_late_lines_out(status: int, stdout: str, stderr: str) -> None:
    """mpiexec, held up by the launcher after its report, was not stopped: the job succeeded
    and every one of its :data:`LATE` lines reached the launcher's stdout."""
    assert "did not exit" not in stderr, stderr
    assert status == 0, stderr
    assert stdout.count("a late line of mpiexec") == LATE_LINES, stdout[-500:]


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_time_the_launchers_own_output_stalls_is_not_mpiexecs_wrapup(tmp_path):
    """The launcher's stdout is a pipe nobody reads for longer than the wrap-up (a paused
    pager) while mpiexec prints 300 KB after its report: mpiexec is blocked on its own pipe by
    the launcher, not stuck, and must get its output out and exit, not be stopped as not
    exiting in time (its later lines were lost with it)."""
    wrapper, _ = _wrapped_hydra(tmp_path, LATE)
    with _launched(tmp_path, wrapper) as launcher:
        wait_while_running(lambda: _reported(tmp_path), launcher, "Hydra's report")
        time.sleep(WRAPUP + 1.5)  # stdout unread: the launcher blocks on its own writes
        assert launcher.poll() is None, "the launcher's output was not held up"
        stdout, stderr = launcher.communicate(timeout=30)
    _assert_late_lines_out(launcher.returncode, stdout, stderr)


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_a_success_reported_before_more_lines_than_the_tail_keeps_stands(tmp_path):
    """Hydra reported each rank's 0, then mpiexec printed more lines than its tail keeps
    (:data:`READ_LINES`) and stayed: stopping it ends a job that succeeded. The report had
    left the tail, so the job was reported as ``mpiexec 0 failed with signal SIGTERM``."""
    status, stderr = _run_past_the_tail(tmp_path, code=0)
    assert status == 0, stderr
    assert f"mpiexec 0 did not exit {WRAPUP:g} s after it reported" in stderr, stderr
    assert stderr.rstrip().endswith("every rank had exited 0, so the attempt succeeded"), stderr
    assert not (tmp_path / "run" / "failure.json").exists(), stderr


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_a_stop_while_the_launchers_own_output_stalls_names_the_stall(tmp_path):
    """SIGTERM to the launcher while its stdout is unread and mpiexec's late lines wait on it:
    the job had finished (Hydra's all-zero report came first), and what keeps mpiexec's output
    from being drained is the launcher's own stalled stdout. It was said to be "a process that
    left its process group (setsid, a daemon)", which sent the user after a process that is
    not there."""
    wrapper, _ = _wrapped_hydra(tmp_path, f"{LATE}\nsleep 60 &\nwait")
    with _launched(tmp_path, wrapper, drain=1.0) as launcher:
        wait_while_running(lambda: _reported(tmp_path), launcher, "Hydra's report")
        time.sleep(0.5)  # stdout unread: mpiexec's pump blocks on the launcher's write
        launcher.send_signal(signal.SIGTERM)
        stderr = launcher.stderr.read()  # stdout still unread, till the launcher's end
        launcher.wait(timeout=30)
    assert launcher.returncode == 0, stderr
    assert "got SIGTERM after the job had finished" in stderr, stderr
    assert "left its process group" not in stderr, stderr
    log = tmp_path / "run" / "logs" / "mpiexec-0.log"
    # stopped: the launcher gives its view up at the stall, not after OUTPUT_DRAIN_SECONDS
    stalled = "the launcher's output is stalled on its last lines (nothing reads it), so it "
    assert f"{stalled}lacks " in stderr, stderr
    assert f" line(s) of mpiexec-0 ('{log}'): their logs have them" in stderr, stderr
    # the pump never waits on the stalled output: the log has mpiexec's every late line
    assert log.read_text().count("a late line of mpiexec") == LATE_LINES


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_time_the_launcher_is_stopped_is_not_mpiexecs_wrapup(tmp_path):
    """The launcher stopped (Ctrl-Z, a frozen container) for longer than the wrap-up right
    after Hydra's report, then continued, while mpiexec had 300 KB left to print: mpiexec was
    blocked on its pipe by the stopped launcher, not stuck, and exits 0.5 s after its last
    line, well within its own 2 s. It was stopped on the launcher's return as not exiting in
    time (the time the launcher was stopped counted as mpiexec's)."""
    wrapper, _ = _wrapped_hydra(tmp_path, f"{LATE}\nsleep 0.5")
    with _launched(tmp_path, wrapper) as launcher:
        with ThreadPoolExecutor(1) as pool:  # stdout read all along: only the stop holds
            out = pool.submit(launcher.stdout.read)
            wait_while_running(lambda: _reported(tmp_path), launcher, "Hydra's report")
            launcher.send_signal(signal.SIGSTOP)
            time.sleep(WRAPUP + 1)
            launcher.send_signal(signal.SIGCONT)
            stderr = launcher.stderr.read()
            stdout = out.result(timeout=30)
        launcher.wait(timeout=30)
    _assert_late_lines_out(launcher.returncode, stdout, stderr)


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_a_failure_reported_before_more_lines_than_the_tail_keeps_keeps_the_ranks_status(
    tmp_path,
):
    """Hydra reported both ranks' exit(3), then mpiexec printed more lines than its tail keeps
    (:data:`READ_LINES`) and stayed, so the launcher stopped it: the report's status is still
    the ranks' 3. Hydra's statuses had left the tail, so it was mpiexec's own SIGTERM (143)."""
    status, stderr = _run_past_the_tail(tmp_path, code=3)
    assert f"mpiexec 0 did not exit {WRAPUP:g} s after it reported" in stderr, stderr
    assert status == 3, stderr
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert report["exit_code"] == 3, report
    assert report["cause"] == "a rank exited with code 3; mpiexec itself died of signal SIGTERM"
