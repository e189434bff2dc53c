"""``local --workers 2 --servers 2`` with real shards: keys, ports, job id and shutdown all fit.

The workers are a user program (ps_launch_worker.py) driving the parameter-server strategy at the
contract level; their final weights must equal one process training on the whole batch.
Skipped until the parameter server (``distconv.sync.ps``) is merged.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.child_env import child_path
from tests.launcher.launch_cli import launcher_env
from tests.processes import run_job

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("ps_launch_worker.py")
# launcher_env: its HOME is each test's own (conftest.py)
ENV = launcher_env({**os.environ, "PYTHONPATH": child_path()})
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
    ENV.pop(_name, None)


def _has_pserver() -> bool:
    try:
        return importlib.util.find_spec("distconv.sync.ps.client") is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.skipif(not _has_pserver(), reason="distconv.sync.ps is not merged yet")
@pytest.mark.timeout(180)
def test_two_workers_two_shards_equal_one_process(tmp_path):
    sys.path.insert(0, str(WORKER.parent))
    try:
        import ps_launch_worker as worker
    finally:
        sys.path.remove(str(WORKER.parent))
    from distconv.optim import create_optimizer
    from distconv.sync.local import LocalSync

    steps, run = 4, tmp_path / "run"
    done = run_job(
        [sys.executable, "-m", "launcher", "local", "--workers", "2", "--servers", "2",
         "--run-dir", str(run), "--grace", "20", "--", str(WORKER), str(tmp_path), str(steps)],
        env=ENV, timeout=170, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    assert sorted(p.name for p in (run / "keys").iterdir() if p.name.startswith("worker")) == [
        "worker-0.key", "worker-0.key_secret", "worker-1.key", "worker-1.key_secret",
    ]  # fmt: skip
    assert {line.split("]")[0] + "]" for line in done.stdout.splitlines()} >= {
        "[server 0]", "[server 1]", "[worker 0]", "[worker 1]",
    }  # fmt: skip

    net = worker.small_net()
    sync = LocalSync(create_optimizer("sgd", lr=0.05))
    sync.setup(net.parameters(), {"batch": worker.BATCH})
    worker.train(net, sync, steps, 0, 1)
    for rank in range(2):
        got = np.load(tmp_path / f"weights-{rank}.npz")
        for p in net.parameters():
            np.testing.assert_allclose(got[p.name], p.value, rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(not _has_pserver(), reason="distconv.sync.ps is not merged yet")
@pytest.mark.timeout(50)
def test_a_worker_that_raises_ends_the_job_with_its_error_not_after_the_grace(tmp_path):
    """``distconv train`` workers in a sync job: the one left waits for the raiser's push,
    and its SIGTERM waits for a step that never ends, so before the shard failed the job at
    the raiser's ``bye`` the launcher's stop took the whole grace (32 s of 30 measured)."""
    crash = Path(__file__).with_name("ps_train_crash.py")
    env = {k: v for k, v in ENV.items() if k != "DISTCONV_DEBUG"}  # a traceback, not the line
    # run_job: a launcher that waits out its grace is killed at 45 s with its shard and
    # workers, whatever its own signal handling (its second signal, which SIGKILLs them)
    done = run_job(
        [sys.executable, "-m", "launcher", "local", "--workers", "2", "--servers", "1",
         "--run-dir", str(tmp_path / "run"), "--grace", "120", "--", str(crash),
         str(tmp_path / "out")],
        env=env, timeout=45, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:] + done.stdout[-3000:]
    cause = 'last step 5) closed on "MemoryError: out of memory in layer fc1 (simulated)"'
    worker_0 = (tmp_path / "run" / "logs" / "worker-0.log").read_text()
    assert "distconv train: error: rank 0, step 6:" in worker_0, worker_0[-3000:]
    assert cause in worker_0 and "job failed: rank 1 (host" in done.stdout, done.stdout[-3000:]
