"""tests/processes.py: a hung job's every process is killed, not only the one a test started."""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from distconv.notes import notes_of
from launcher.commands import clean_environ
from launcher.mpi import exported_names
from tests import processes
from tests.processes import job_env, job_processes, kill_job, marked, run_job

# a launcher in miniature: a child in a session of its own that ignores SIGTERM, its
# grandchild, and an orphan whose parent is gone; then the launcher hangs waiting for a child
# of its own. Each sleep's pid is in a file named after it (see job_pids)
HUNG_JOB = """
setsid sh -c 'trap "" TERM; sleep 300 & echo $! > "$1/grandchild"; wait' _ "$1" &
sh -c 'sleep 300 & echo $! > "$1/orphan"' _ "$1"
sleep 300 &
echo $! > "$1/hung"
while [ ! -s "$1/grandchild" ]; do sleep 0.01; done
touch "$1/ready"
wait
"""


def job_pids(folder: Path) -> list[int]:
    """The pids of :data:`HUNG_JOB`'s sleeps, which it wrote to ``folder``."""
    return [int((folder / name).read_text()) for name in ("grandchild", "orphan", "hung")]


def gone_within(pids: list[int], seconds: float) -> list[int]:
    """The pids of ``pids`` still alive (not a zombie) after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        left = [p for p in pids if _alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


#: marks the processes of one test case, beside (and independent of) the job's mark: the
#: clean-up of a case kills by it, so it is right even where the helper under test is wrong
CASE = "TESTS_PROCESSES_CASE"


def _case_env() -> dict[str, str]:
    """``os.environ`` marked for one test case (see :data:`CASE`)."""
    return {**os.environ, CASE: secrets.token_hex(8)}


def _kill(pids: list[int], case: dict[str, str]) -> None:
    """SIGKILL what of ``pids`` still carries the mark of ``case``: a test is hermetic even
    where the helper it tests failed, and a pid whose process is gone and reaped (the usual
    end, by now) may be another's, which is not the test's to kill."""
    entry = f"{CASE}={case[CASE]}".encode()
    for pid in pids:
        processes._kill_marked(pid, entry)


@pytest.mark.timeout(60)
def test_a_hung_job_is_killed_whole_on_its_timeout(tmp_path):
    case = _case_env()
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        run_job(["sh", "-c", HUNG_JOB, "_", str(tmp_path)], env=case, timeout=3)
    assert (tmp_path / "ready").exists()  # the job was whole when the timeout came
    pids = job_pids(tmp_path)
    try:
        assert gone_within(pids, 5) == []
        said = "".join(notes_of(raised.value))
        assert "sleep 300" in said, said
    finally:
        _kill(pids, case)


@pytest.mark.timeout(30)
def test_a_job_env_ends_what_outlives_its_block(tmp_path):
    with job_env(os.environ) as env:
        child = subprocess.Popen(["setsid", "sleep", "300"], env=env)
        deadline = time.monotonic() + 10
        while child.pid not in job_processes(env):  # marked from its start, through setsid
            assert time.monotonic() < deadline, "the child never showed its mark"
            time.sleep(0.02)
    try:
        assert child.wait(timeout=10) == -9
        assert job_processes(env) == {}
    finally:
        child.kill()
        child.wait()


@pytest.mark.timeout(30)
def test_a_job_that_ends_in_time_is_returned_as_subprocess_run_does(tmp_path):
    done = run_job(["sh", "-c", "echo out; echo err >&2; exit 3"], env=os.environ, timeout=10)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


@pytest.mark.timeout(60)
def test_a_hung_job_with_its_own_output_streams_is_killed_whole(tmp_path):
    """Output to a file and to nowhere, not pipes (a test of a launcher's closed or redirected
    streams): the whole job still goes at the timeout."""
    case = _case_env()
    with open(tmp_path / "out", "w") as out, pytest.raises(subprocess.TimeoutExpired):
        argv = ["sh", "-c", HUNG_JOB, "_", str(tmp_path)]
        run_job(argv, env=case, timeout=3, stdout=out, stderr=subprocess.DEVNULL)
    pids = job_pids(tmp_path)
    try:
        assert gone_within(pids, 5) == []
    finally:
        _kill(pids, case)


@pytest.mark.timeout(30)
def test_a_job_s_output_goes_where_it_is_sent(tmp_path):
    with open(tmp_path / "out", "w") as out:
        argv = ["sh", "-c", "echo out; echo err >&2"]
        done = run_job(argv, env=os.environ, timeout=10, stdout=out, stderr=subprocess.PIPE)
    assert (done.stdout, done.stderr) == (None, "err\n")
    assert (tmp_path / "out").read_text() == "out\n"


def test_the_mark_reaches_every_child_and_changes_no_command():
    """The launcher keeps it in each child's environment, and exports no more for it: were it
    one of distconv's variables, an Open MPI command under test would gain a ``-x``."""
    job = marked({"PATH": "/bin"})
    assert clean_environ(job) == job
    assert exported_names(job) == ["PATH"]


@pytest.mark.timeout(60)
def test_mpiexec_s_ranks_carry_the_mark(tmp_path):
    """``mpiexec`` starts its ranks through a daemon of its own (Hydra's proxy), which builds
    their environment: the mark must reach them, or a hung MPI job outlives its test. Each
    rank also starts a process in a session of its own, which Hydra's clean-up of its ranks
    (a second after mpiexec dies) does not reach: only the mark's kill ends it."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec is not on PATH")
    # the file is named after the rank's pid and holds its session-leaving child's
    rank = (
        'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$1/$$.tmp" && '
        'mv "$1/$$.tmp" "$1/$$.pid" && exec sleep 300'
    )
    pids: list[int] = []
    case = _case_env()
    with job_env(case) as env:
        argv = [mpiexec, "-n", "2", "sh", "-c", rank, "_", str(tmp_path)]
        launcher = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while len(ranks := list(tmp_path.glob("*.pid"))) < 2:
                assert time.monotonic() < deadline, "the ranks never started"
                time.sleep(0.05)
            pids = [int(path.stem) for path in ranks] + [int(p.read_text()) for p in ranks]
            assert set(pids) <= set(job_processes(env))
        finally:
            launcher.kill()  # what follows is the mark's work alone
            launcher.wait()
    try:
        assert gone_within(pids, 5) == []
    finally:
        _kill(pids, case)


@pytest.mark.timeout(30)
def test_a_pid_taken_by_another_process_after_the_scan_is_not_killed(monkeypatch):
    """The scan found a process of the job, which exited, and its pid went to another (a
    bystander: another test's job, the runner's own child) before the kill: that one lives."""
    bystander = subprocess.Popen(["sleep", "300"])
    scans = iter([{bystander.pid: "a process of the job, gone since"}])
    monkeypatch.setattr(processes, "job_processes", lambda env: next(scans, {}))
    try:
        kill_job(marked(os.environ))
    finally:
        bystander.terminate()  # what ends it tells: SIGKILL was kill_job's
        assert bystander.wait() == -signal.SIGTERM, "a process of no job was killed"


@pytest.mark.timeout(30)
def test_a_pid_the_scan_found_gone_is_killed_when_a_process_of_the_job_takes_it(monkeypatch):
    """The scan found a process of the job that was gone by the kill (its pidfd could not be
    opened), and a new process of the same job took its pid before the next scan: kill_job
    skipped every pid it had once seen, so that one lived on, and was named as killed."""
    with job_env(os.environ) as env:
        newcomer = subprocess.Popen(["sleep", "300"], env=env)
        try:
            opened = os.pidfd_open
            opens = iter([ProcessLookupError()])  # the first open: the one found is gone

            def pidfd_open(pid: int, *args: int) -> int:
                if (gone := next(opens, None)) is not None:
                    raise gone
                return opened(pid, *args)

            monkeypatch.setattr(os, "pidfd_open", pidfd_open)
            while newcomer.pid not in job_processes(env):
                time.sleep(0.02)
            kill_job(env)
            monkeypatch.undo()
            assert newcomer.wait(timeout=5) == -signal.SIGKILL, "a process of the job lived on"
        finally:
            newcomer.kill()
            newcomer.wait()


@pytest.mark.timeout(30)
def test_a_case_s_clean_up_leaves_a_process_that_took_one_of_its_pids():
    """The clean-up of the tests above comes after their processes are gone and reaped, when
    any process may have their pids: a bare ``kill(pid)`` there hit that bystander."""
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        _kill([bystander.pid], _case_env())
    finally:
        bystander.terminate()  # what ends it tells: SIGKILL was the clean-up's
        assert bystander.wait() == -signal.SIGTERM, "a process of no test case was killed"


@pytest.mark.timeout(30)
def test_a_job_whose_kill_fails_still_loses_its_first_process(tmp_path, monkeypatch):
    """Where the kill by the mark itself fails (no pidfds here, too many open files), the
    process run_job started is still killed and reaped, and the timeout is what is raised."""

    def refused(env: object) -> str:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(processes, "kill_job", refused)
    case = _case_env()
    argv = ["sh", "-c", 'echo $$ > "$1/pid.tmp" && mv "$1/pid.tmp" "$1/pid"; exec sleep 300']
    pid = tmp_path / "pid"
    try:
        with pytest.raises(subprocess.TimeoutExpired) as raised:
            run_job([*argv, "_", str(tmp_path)], env=case, timeout=2)
        assert gone_within([int(pid.read_text())], 5) == []
        said = "".join(notes_of(raised.value))  # the note run_job makes
        assert "could not be killed" in said, said
    finally:
        if pid.exists():
            _kill([int(pid.read_text())], case)


@pytest.mark.timeout(30)
def test_where_pidfds_are_refused_the_job_is_still_killed_by_its_mark(monkeypatch):
    """Linux before 5.3, or the seccomp profile of older Docker releases, refuses
    ``pidfd_open``: kill_job raised there, and killed nothing."""

    def refused(pid: int, flags: int = 0) -> int:
        raise OSError(errno.ENOSYS, "Function not implemented")

    with job_env(os.environ) as env:
        child = subprocess.Popen(["sleep", "300"], env=env)
        bystander = subprocess.Popen(["sleep", "300"])
        try:
            while child.pid not in job_processes(env):
                time.sleep(0.02)
            scan, stale = processes.job_processes, {bystander.pid: "gone since, pid reused"}
            scans = iter([lambda env: {**scan(env), **stale}])  # the first scan is stale
            monkeypatch.setattr(processes, "job_processes", lambda env: next(scans, scan)(env))
            monkeypatch.setattr(os, "pidfd_open", refused)
            kill_job(env)
            monkeypatch.undo()
            assert child.wait(timeout=5) == -signal.SIGKILL
            assert bystander.poll() is None, "a process of no job was killed"
        finally:
            monkeypatch.undo()
            for proc in (child, bystander):
                proc.kill()
                proc.wait()
