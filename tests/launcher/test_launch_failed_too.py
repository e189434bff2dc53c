"""``failure.json``'s ``victims`` held only the workers that exited 75: the workers of a shard
that was killed, which stopped on it with words of their own (``pserver shard 0 ... is gone``,
exit 1), were in no field, and an operator could not tell from the report whether they were
hurt on their own. They are in ``failed_too``, each with its last words, and the headline
names them. A real job, a real SIGKILL."""

from __future__ import annotations

import json
import signal

import pytest

from tests.launcher.launch_cli import launch
from tests.launcher.test_launch_crash_way_on import _killed_after_checkpoints
from tests.launcher.test_preempt_signals import ENV, JOB, LOCAL
from tests.processes import job_env


@pytest.mark.timeout(180)
def test_the_workers_of_a_killed_shard_are_recorded_as_failed_too(tmp_path):
    with job_env(ENV) as env:
        marks = {"DISTCONV_ROLE=server", "RANK=0"}
        status, err = _killed_after_checkpoints(tmp_path, env, marks, LOCAL, "worker-0")
    assert status == 128 + signal.SIGKILL, err[-3000:]
    report = json.loads((tmp_path / "runs" / JOB / "failure.json").read_text())
    too = {(o["role"], o["rank"]): o for o in report["failed_too"]}
    assert set(too) == {("worker", 0), ("worker", 1)}, report
    assert all("pserver shard 0" in o["said"] and "is gone" in o["said"] for o in too.values())
    assert "worker 0 failed too (exit code 1); worker 1 failed too (exit code 1)" in err


#: rank 1 fails at once; rank 0 would wait a minute: the launcher's stop ends it (SIGTERM)
_ONE_FAILS = (
    "import os, sys, time\n"
    "if os.environ['RANK'] == '1':\n"
    "    print('rank 1 failing on purpose', flush=True)\n"
    "    sys.exit(3)\n"
    "time.sleep(60)\n"
)


@pytest.mark.timeout(120)
def test_a_child_the_launchers_stop_ended_is_not_failed_too(tmp_path):
    """Rank 0 died of the stop's SIGTERM, a status that reads as a failure: it did not fail."""
    script, run = tmp_path / "one_fails.py", tmp_path / "run"
    script.write_text(_ONE_FAILS)
    argv = ["local", "--workers", "2", "--servers", "0", "--run-dir", str(run)]
    done = launch(*argv, "--", str(script), cwd=tmp_path, timeout=100)
    assert done.returncode == 3, done.stderr[-3000:]
    report = json.loads((run / "failure.json").read_text())
    assert (report["role"], report["rank"], report["failed_too"]) == ("worker", 1, []), report
    assert "failed too" not in done.stderr, done.stderr[-3000:]


_TWO_FAIL = (
    "import os, sys, time\n"
    "if os.environ['RANK'] == '1':\n"
    "    time.sleep(1)\n"
    "    print('rank 1 failing on purpose', flush=True)\n"
    "    sys.exit(3)\n"
    "print('rank 0: my own reason to give up (exit 143)', flush=True)\n"
    "time.sleep(0.5)\n"
    "sys.exit(143)\n"
)


@pytest.mark.timeout(120)
def test_a_child_that_exits_143_for_its_own_reasons_is_failed_too(tmp_path):
    """A bare exit 143, no signal sent and no stop line said, is a failure of its own: only a
    death by a stop signal, or a checkpointed stop, is left out."""
    script, run = tmp_path / "two_fail.py", tmp_path / "run"
    script.write_text(_TWO_FAIL)
    argv = ["local", "--workers", "2", "--servers", "0", "--run-dir", str(run)]
    done = launch(*argv, "--", str(script), cwd=tmp_path, timeout=100)
    report = json.loads((run / "failure.json").read_text())
    too = {(o["role"], o["rank"]): o for o in report["failed_too"]}
    assert too.get(("worker", 0), {}).get("exit_code") == 143, report
    assert "worker 0 failed too (exit code 143)" in done.stderr, done.stderr[-3000:]
