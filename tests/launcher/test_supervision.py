"""Gang semantics with real processes: the real launcher runs gang_child.py as a user script."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.child_env import child_path
from tests.launcher.attempt_logs import logged
from tests.launcher.launch_cli import launcher_env
from tests.processes import CompletedJob, job_env, run_job

REPO_ROOT = Path(__file__).resolve().parents[2]
CHILD = str(Path(__file__).with_name("gang_child.py"))
# launcher_env: its HOME is each test's own (conftest.py)
ENV = launcher_env({**os.environ, "PYTHONPATH": child_path()})
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_RESTART"):
    ENV.pop(_name, None)


def launch_argv(run_dir: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "launcher", "local", "--run-dir", str(run_dir), *options]


def launch(run_dir: Path, *options: str, timeout: float = 60) -> CompletedJob:
    """The launcher run to its end; where it hangs past ``timeout``, it and every process of
    its job are killed (a child may ignore SIGTERM, a grandchild outlive its parent)."""
    return run_job(launch_argv(run_dir, *options), env=ENV, timeout=timeout, cwd=run_dir.parent)


def launch_workers(
    run_dir: Path,
    workers: int,
    *argv: str,
    extra: Sequence[str] = (),
    grace: float | None = None,
    restarts: int | None = None,
    timeout: float = 60,
) -> CompletedJob:
    """``distconv-launch local`` with ``workers`` workers and no servers, each running ``argv``."""
    options = ["--workers", str(workers), "--servers", "0", *extra]
    if grace is not None:
        options += ["--grace", str(grace)]
    if restarts is not None:
        options += ["--max-restarts", str(restarts)]
    return launch(run_dir, *options, "--", *argv, timeout=timeout)


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie waiting for a reaper."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def recorded_pids(out: Path) -> list[int]:
    pids = [json.loads(p.read_text())["pid"] for p in out.glob("*.json") if "-r" in p.name]
    pids += [json.loads(p.read_text())["pid"] for p in out.glob("*.grandchild")]
    return pids


def wait_for(paths: list[Path], limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"children never started: {paths}"
        time.sleep(0.05)


def wait_gone(pids: list[int], limit: float = 5) -> list[int]:
    """The pids still alive after ``limit`` s (an orphan's reparenting is not instant)."""
    deadline = time.monotonic() + limit
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


@pytest.mark.timeout(60)
def test_env_roles_ranks_and_threads(tmp_path):
    out, run = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    done = launch_workers(
        run, 3, CHILD, str(out), "env", extra=("--job-id", "j1", "--threads", "2")
    )
    assert done.returncode == 0, done.stderr
    for rank in range(3):
        record = json.loads((out / f"worker-{rank}-r0.json").read_text())
        assert record["runtime"] == {
            "role": "worker",
            "rank": rank,
            "world_size": 3,
            "local_rank": rank,
            "job_id": "j1",
            "pservers": [],
            "keys_dir": None,
            "source": "distconv",
            "keys_from_env": False,
        }
        assert set(record["env"].values()) == {None, "2", "j1"}
        assert record["env"]["DISTCONV_PSERVERS"] is None and record["env"]["OMP_NUM_THREADS"]


@pytest.mark.timeout(60)
def test_a_failing_child_ends_the_gang_and_is_reported(tmp_path):
    out, run = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    start = time.monotonic()
    done = launch_workers(run, 3, CHILD, str(out), "stubborn-fail", grace=2, timeout=30)
    # a bound on a hang, not a speed test: rank 0 ignores SIGTERM, so the grace runs out
    assert time.monotonic() - start < 2 + 10
    assert done.returncode == 3
    assert "worker 1 failed with exit code 3 (after 0 restart(s))" in done.stderr
    assert "    rank 1 gives up" in done.stderr  # the tail of its log
    report = json.loads((run / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"], report["signal"]) == (
        "worker",
        1,
        3,
        None,
    )
    assert report["tail"] == ["rank 1 gives up"]
    assert report["log"] == str(run / "logs" / "worker-1.log")
    # rank 2 checkpointed on SIGTERM; rank 0 ignored it and needed the SIGKILL after the grace
    assert (out / "worker-2-r0.sigterm").exists() and not (out / "worker-0-r0.sigterm").exists()
    pids = recorded_pids(out)
    assert len(pids) == 6  # three workers, three grandchildren
    assert wait_gone(pids) == []


@pytest.mark.timeout(90)
def test_restart_resumes_from_the_checkpoint(tmp_path):
    out, run = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    done = launch_workers(run, 2, CHILD, str(out), "steps", restarts=1, grace=5)
    assert done.returncode == 0, done.stderr
    assert "worker 1 failed with exit code 3; restarting the job (1 of 1)" in done.stderr
    assert json.loads((out / "done.json").read_text()) == {"start": 7, "restart": 1}
    assert json.loads((out / "ckpt.json").read_text()) == {"step": 10}
    assert not (run / "failure.json").exists()
    log = (run / "logs" / "worker-1.log").read_text()
    assert log.count("rank 1 fails after the checkpoint of step 5") == 1


@pytest.mark.timeout(60)
def test_out_of_restarts_reports_the_last_failure(tmp_path):
    out, run = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    done = launch_workers(run, 2, CHILD, str(out), "fail", restarts=1, grace=2)
    assert done.returncode == 3
    assert done.stderr.count("restarting the job") == 1
    report = json.loads((run / "failure.json").read_text())
    assert (report["rank"], report["restart"], report["max_restarts"]) == (1, 1, 1)
    assert (out / "worker-0-r1.json").exists()  # the restart really ran
    assert wait_gone(recorded_pids(out)) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_a_signal_reaches_every_child_and_nothing_survives(tmp_path, signum, status):
    out, run = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    argv = launch_argv(
        run, "--workers", "2", "--servers", "0", "--grace", "10", "--", CHILD, str(out), "sleep"
    )
    with job_env(ENV) as env:  # nothing of the job outlives a failed check
        launcher = subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_for([out / f"worker-{r}-r0.grandchild" for r in range(2)])
            launcher.send_signal(signum)
            stdout, stderr = launcher.communicate(timeout=30)
        finally:
            launcher.kill()
            launcher.wait()
        assert launcher.returncode == status, stderr
        assert f"stopped by {signal.Signals(signum).name}" in stderr
        assert (out / "worker-0-r0.sigterm").exists() and (out / "worker-1-r0.sigterm").exists()
        assert not (run / "failure.json").exists()
        pids = recorded_pids(out)
        assert len(pids) == 4
        assert wait_gone(pids) == []


@pytest.mark.timeout(90)
def test_lines_are_prefixed_and_never_split(tmp_path):
    out, run = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    count, length = 400, 20000  # lines far longer than a pipe's buffer, written as fast as can be
    done = launch_workers(run, 3, CHILD, str(out), "chatter", str(count), str(length), timeout=80)
    assert done.returncode == 0, done.stderr
    pattern = re.compile(r"\[worker (\d)\] (\d):(\d+):([a-c])\4*")
    seen = {0: [], 1: [], 2: []}
    for line in done.stdout.splitlines():
        match = pattern.fullmatch(line)
        assert match, f"a split or interleaved line: {line[:80]}...{line[-80:]}"
        rank = int(match.group(1))
        assert int(match.group(2)) == rank and match.group(4) == "abc"[rank]
        assert len(line) == len(f"[worker {rank}] {rank}:{match.group(3)}:") + length
        seen[rank].append(int(match.group(3)))
    assert seen == {r: list(range(count)) for r in range(3)}
    for rank in range(3):
        log = logged(run / "logs" / f"worker-{rank}.log").decode().splitlines()
        assert len(log) == count and log[0] == f"{rank}:0:" + "abc"[rank] * length


@pytest.mark.timeout(30)
def test_a_program_that_is_not_there_is_one_clear_error(tmp_path):
    done = launch_workers(tmp_path / "run", 1, "no-such-prog-x")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "distconv-launch local: error: 'no-such-prog-x' is neither a program on PATH nor a .py "
        "file; distconv train arguments start with an option, e.g. -- --epochs 2"
    ]


@pytest.mark.timeout(30)
def test_any_program_runs_with_the_runtime_variables(tmp_path):
    run = tmp_path / "run"
    done = launch_workers(
        run,
        2,
        "sh",
        "-c",
        'echo "$DISTCONV_ROLE $RANK/$WORLD_SIZE $DISTCONV_JOB_ID"',
        extra=("--job-id", "sh1"),
    )
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [
        "[worker 0] worker 0/2 sh1",
        "[worker 1] worker 1/2 sh1",
    ]


@pytest.mark.timeout(30)
def test_a_child_killed_by_a_signal_is_reported_by_name(tmp_path):
    run = tmp_path / "run"
    done = launch_workers(
        run, 2, "sh", "-c", 'if [ "$RANK" = 1 ]; then kill -KILL $$; fi; sleep 30', grace=2
    )
    assert done.returncode == 137
    assert "worker 1 failed with signal SIGKILL" in done.stderr
    report = json.loads((run / "failure.json").read_text())
    assert (report["rank"], report["exit_code"], report["signal"]) == (1, None, "SIGKILL")


@pytest.mark.timeout(60)
def test_a_killed_launcher_takes_its_children_with_it(tmp_path):
    out, run = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    argv = launch_argv(run, "--workers", "2", "--servers", "0", "--", CHILD, str(out), "sleep")
    # job_env: a grandchild's own parent dies without stopping it, and it is no check's business
    with job_env(ENV) as env:
        launcher = subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_for([out / f"worker-{r}-r0.grandchild" for r in range(2)])
            records = [out / f"worker-{r}-r0.json" for r in range(2)]
            children = [json.loads(p.read_text())["pid"] for p in records]
            os.kill(launcher.pid, signal.SIGKILL)  # no handler runs: only the kernel can tell them
            launcher.wait(timeout=10)
            assert wait_gone(children) == []
            # each child got SIGTERM from the kernel: it checkpointed as on a launcher's SIGTERM
            assert all((out / f"worker-{r}-r0.sigterm").exists() for r in range(2))
        finally:
            launcher.kill()
            launcher.wait()


@pytest.mark.timeout(120)
def test_the_report_names_the_child_that_failed_first(tmp_path):
    """Rank 1 fails 30 ms before rank 0, often within one poll of the launcher."""
    for attempt in range(4):
        out, run = tmp_path / f"out{attempt}", tmp_path / f"run{attempt}"
        out.mkdir()
        done = launch_workers(run, 3, CHILD, str(out), "race", grace=2)
        report = json.loads((run / "failure.json").read_text())
        assert (report["rank"], report["exit_code"], done.returncode) == (1, 4, 4), done.stderr
