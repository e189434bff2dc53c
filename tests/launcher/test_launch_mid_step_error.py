"""``distconv-launch local`` of a job whose rank 0 stops on an error in the middle of a step
while rank 1 waits in it (``tests/sync/ps/mid_step_worker.py``: a ``DataError`` of
``loss_rows_checked`` after rank 0's forward; rank 1's share of the step is empty): the
launcher reports rank 0's error as the job's failure, in sync and async mode; rank 1's log
says the shard's words, which quote it; the job ends within seconds (not at the shards' 60 s
timeout), and no process of it is left."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV
from tests.processes import job_left, run_job

WORKER = Path(__file__).resolve().parents[1] / "sync" / "ps" / "mid_step_worker.py"
CAUSE = (
    "DataError: SoftmaxCrossEntropy 'loss' takes its mean over 2 rows, but the batch of 2 "
    "sequence(s) of 'labelled' counts 1 rows"
)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_rank_that_raised_mid_step_is_the_reported_failure(tmp_path, mode):
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "launcher", "local", "--workers", "2", "--servers", "1",
            "--mode", mode, "--run-dir", str(run), "--", str(WORKER)]  # fmt: skip
    began = time.monotonic()
    done = run_job(argv, env=ENV, timeout=60, cwd=tmp_path)
    took = time.monotonic() - began
    said = done.stderr + done.stdout[-3000:]
    assert done.returncode == 1, said
    assert "distconv-launch: worker 0 failed with exit code 1 (after 0 restart(s))" in said, said
    assert f"    mid_step_worker.py: error: {CAUSE}" in done.stderr, said
    report = json.loads((run / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 0, 1), report
    assert report["tail"][-1].startswith(f"mid_step_worker.py: error: {CAUSE}"), report
    # rank 1 stopped on the shard's word, which quotes rank 0's error, before any signal
    victim = (run / "logs" / "worker-1.log").read_text()
    ended = "abandoned step 2 on" if mode == "sync" else "closed on"  # its abandon, its bye
    assert "PeerFailed: rank 1, " in victim and f'{ended} "{CAUSE}' in victim, victim[-3000:]
    assert took < 30, (took, said)  # not at the shards' timeout (60 s)
    assert job_left(done.env, 5) == {}
