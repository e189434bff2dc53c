"""A real ``distconv-launch local`` job (2 workers, 2 shards, a small model on synthetic data)
whose every child gets SIGTERM twice, the second 0.2 or 0.3 s after the first, as a node agent
or a scheduler that repeats its signal sends them. The workers stop with their checkpoint, and
the second signal may end a worker, or a shard after its drain, as it exits: the launcher
reported "worker 0 failed with signal SIGTERM" (or "server 0 ..."), with no way on, though the
run had stopped with a checkpoint that ``--resume`` continues. Which of the ends comes about
depends on the moment; each is the checkpointed stop.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.launcher.test_preempt_signals import ENV, JOB, ended, launch, log, trained_epoch_1
from tests.processes import job_env, job_processes

#: a job of 2 workers and 2 shards, as the review that found it ran
SIZES = ("local", "--workers", "2", "--servers", "2")


def _children(env: Mapping[str, str]) -> list[int]:
    """The pids of the job's workers and shards (their environment names their role)."""
    pids = []
    for pid, command in job_processes(env).items():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(b"DISTCONV_ROLE=") for e in environ) and "distconv" in command:
            pids.append(pid)
    return pids


def _sigterm(pids: list[int]) -> None:
    """SIGTERM to each of ``pids`` still there."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


@pytest.mark.timeout(150)
@pytest.mark.parametrize("gap", [0.2, 0.3])
def test_a_job_signalled_twice_reports_its_checkpointed_stop_and_the_way_on(tmp_path, gap):
    with job_env(ENV) as env:
        launcher = launch(tmp_path, env, 400, how=SIZES)
        try:
            trained_epoch_1(tmp_path, launcher)
            children = _children(env)
            assert len(children) == 4, job_processes(env)
            _sigterm(children)
            time.sleep(gap)
            _sigterm(children)
            status, err = ended(launcher, tmp_path)
        finally:
            launcher.kill()
            launcher.wait()
    assert status == 143, err[-3000:]
    steps = {re.search(r"stopped.* after step (\d+)", log(tmp_path, f"worker-{r}")) for r in (0, 1)}
    assert None not in steps, err[-3000:]
    (step,) = {m.group(1) for m in steps}  # the ranks agreed on it
    assert "failed with" not in err and "exited (code 0)" not in err, err[-3000:]
    assert re.search(rf"worker \d stopped .*after step {step}, with a checkpoint", err), err[-3000:]
    way_on = "with a checkpoint; to go on with this run, give the same command (and --resume"
    assert "a checkpointed stop, not a crash: " in err and way_on in err, err[-3000:]
    report = json.loads((tmp_path / "runs" / JOB / "failure.json").read_text())
    assert report["role"] == "worker", report
    checkpoint = tmp_path / "runs" / JOB / "train" / "checkpoints" / f"step-{int(step):08d}"
    assert checkpoint.is_dir(), sorted(checkpoint.parent.iterdir())
