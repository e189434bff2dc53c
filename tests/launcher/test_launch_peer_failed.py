"""The failure reported is the cause, not its victim: a worker that stopped because another
rank failed exits 75 (``distconv train``'s PeerFailed), and when it is the first failure the
launcher waits up to its settle time for the failure that caused it, then reports that one
(its status, its log's tail) and names the victim. Real ``distconv train`` workers and shard
first; then the rule itself, on stand-in children."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.child import ChildSpec
from launcher.supervisor import Supervisor
from tests.child_env import child_path
from tests.launcher.launch_cli import launcher_env
from tests.processes import run_job

REPO_ROOT = Path(__file__).resolve().parents[2]
CRASH_LATE = Path(__file__).with_name("ps_train_crash_late.py")
EXITS_IN_ORDER = Path(__file__).with_name("exits_in_order.py")
# launcher_env: its HOME is each test's own (conftest.py)
ENV = launcher_env(
    {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
)
ENV["PYTHONPATH"] = f"{child_path()}{os.pathsep}{Path(__file__).parent}"
ENV.pop("DISTCONV_DEBUG", None)  # the one-line error, not a traceback


def _launch(tmp_path: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "launcher", "local", "--workers", "2", "--servers", "1",
            "--run-dir", str(tmp_path / "run"), "--grace", "60", "--", str(CRASH_LATE),
            str(tmp_path / "out")]  # fmt: skip
    return run_job(argv, env=ENV, timeout=80, cwd=tmp_path)


@pytest.mark.timeout(100)
def test_the_rank_that_raised_is_reported_though_its_victim_exited_first(tmp_path):
    done = _launch(tmp_path)  # rank 1 exits once rank 0 has: within the settle time
    said = done.stderr + done.stdout[-3000:]
    assert done.returncode == 1, said
    headline = (
        "distconv-launch: worker 1 failed with exit code 1 (after 0 restart(s)); worker 0 "
        "stopped because of it (exit code 75); last lines of "
    )
    assert headline in done.stderr, said
    assert "    MemoryError: out of memory in layer fc1 (simulated)" in done.stderr, said
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 1, 1), report
    assert report["tail"][-1] == "MemoryError: out of memory in layer fc1 (simulated)"
    log_0 = str(tmp_path / "run" / "logs" / "worker-0.log")
    assert report["victims"] == [{"role": "worker", "rank": 0, "exit_code": 75, "log": log_0}]
    victim = Path(log_0).read_text()
    assert "distconv train: error: rank 0, step 6: pserver " in victim
    assert 'closed on "MemoryError: out of memory in layer fc1 (simulated)"' in victim
    exits = {r: float((tmp_path / "out" / f"exit-{r}").read_text()) for r in (0, 1)}
    assert exits[0] < exits[1], exits  # the victim went first: the race this is about


# -- the rule, on stand-in children ----------------------------------------------------------
def _child(rank: int, code: int, after: float) -> ChildSpec:
    """A worker that exits ``code`` after ``after`` seconds (or at its SIGTERM)."""
    body = f"import sys, time; time.sleep({after}); sys.exit({code})"
    return ChildSpec("worker", rank, [sys.executable, "-c", body])


def _ordered(folder: Path, rank: int, code: int, after: tuple[int, ...] = ()) -> ChildSpec:
    """A worker that exits ``code`` once the workers ``after`` (of the same ``folder``: one per
    attempt) have exited; at once (0.2 s) without them (:mod:`exits_in_order`)."""
    args = [str(folder), str(rank), str(code), *map(str, after)]
    return ChildSpec("worker", rank, [sys.executable, str(EXITS_IN_ORDER), *args])


def _run(tmp_path: Path, specs, settle: float, max_restarts: int = 0):
    """Supervise ``specs`` (a list, or a function of the restart giving one); the status,
    the messages, the failure report and the seconds it took."""
    err = io.BytesIO()
    sup = Supervisor(tmp_path / "run", grace=10, out=io.BytesIO(), err=err, settle=settle)
    start = time.monotonic()
    status = sup.run(specs if callable(specs) else lambda restart: specs, max_restarts)
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    return status, err.getvalue().decode(), report, time.monotonic() - start


@pytest.mark.timeout(60)
def test_a_cause_within_the_settle_time_is_reported_with_its_victims(tmp_path):
    # the cause exits once both victims have (a victim exiting after its cause is stopped,
    # and is no victim then)
    out = tmp_path / "out"
    specs = [_ordered(out, 0, 75), _ordered(out, 1, 1, after=(0, 2)), _ordered(out, 2, 75)]
    status, err, report, _ = _run(tmp_path, specs, settle=4.0)
    assert status == 1, err
    expect = (
        "worker 1 failed with exit code 1 (after 0 restart(s)); worker 0, worker 2 stopped "
        "because of it (exit code 75)"
    )
    assert expect in err, err
    assert (report["rank"], report["exit_code"]) == (1, 1)
    assert [(v["rank"], v["exit_code"]) for v in report["victims"]] == [(0, 75), (2, 75)]


@pytest.mark.timeout(60)
def test_a_victim_with_no_cause_within_the_settle_time_is_reported_as_before(tmp_path):
    """The cause may be stuck, not gone (the shard's timeout named it), or slower than the
    settle time: the victim is reported, after no more than the settle time."""
    specs = [_child(0, 75, 0.2), _child(1, 0, 300)]
    status, err, report, seconds = _run(tmp_path, specs, settle=1.0)
    assert status == 75, err
    expect = (
        "worker 0 failed with exit code 75 (stopped because another rank failed: its last "
        "lines name it; no other child had failed yet) (after 0 restart(s))"
    )
    assert expect in err, err
    assert (report["rank"], report["exit_code"], report["victims"]) == (0, 75, [])
    assert 0.2 + 1.0 <= seconds < 0.2 + 1.0 + 5, seconds  # waited the settle time, no longer


@pytest.mark.timeout(60)
def test_restarts_name_the_cause_and_happen_as_before(tmp_path):
    def specs(restart: int) -> list[ChildSpec]:
        out = tmp_path / f"out-{restart}"
        return [_ordered(out, 0, 75), _ordered(out, 1, 3, after=(0,))]

    status, err, report, _ = _run(tmp_path, specs, settle=4.0, max_restarts=1)
    assert status == 3, err
    expect = (
        "worker 1 failed with exit code 3; worker 0 stopped because of it (exit code 75); "
        "restarting the job (1 of 1)"
    )
    assert expect in err, err
    assert (report["rank"], report["restart"], report["max_restarts"]) == (1, 1, 1)


@pytest.mark.timeout(60)
def test_a_first_failure_that_is_no_victim_is_reported_at_once(tmp_path):
    specs = [_child(0, 1, 0.2), _child(1, 0, 300)]
    status, err, report, seconds = _run(tmp_path, specs, settle=20.0)
    assert (status, report["rank"], report["victims"]) == (1, 0, []), err
    assert seconds < 10, seconds  # no settle time for it


# -- the flag, through distconv-launch ---------------------------------------------------------
#: rank 0 exits 75, rank 1 exits 1 three seconds after rank 0's exit: past the default settle
#: time, within 6 s. Ordered by rank 0's exit: sleeps from the start (0.2 s, 3 s) were raced
#: by a rank 0 started late on a loaded host
VICTIM_THEN_CAUSE = """\
import os, sys, time
from pathlib import Path
from exits_in_order import ALONE, MARGIN, record_pid, wait_exited
rank, pids = os.environ["RANK"], Path(sys.argv[1])
record_pid(pids, rank)
if rank == "0":
    time.sleep(ALONE)
    sys.exit(75)
wait_exited(pids, ["0"])
time.sleep(3.0 - MARGIN)
sys.exit(1)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("settle", "status", "reported"), [("6", 1, 1), ("0", 75, 0)])
def test_the_settle_flag_sets_how_long_a_victim_waits_for_its_cause(
    tmp_path, settle, status, reported
):
    program = tmp_path / "victim_then_cause.py"
    program.write_text(VICTIM_THEN_CAUSE)
    argv = [sys.executable, "-m", "launcher", "local", "--workers", "2", "--servers", "0",
            "--settle", settle, "--run-dir", str(tmp_path / "run"), "--", str(program),
            str(tmp_path / "pids")]  # fmt: skip
    done = run_job(argv, env=ENV, timeout=50, cwd=tmp_path)
    assert done.returncode == status, done.stderr
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["rank"], report["exit_code"]) == (reported, status), done.stderr
