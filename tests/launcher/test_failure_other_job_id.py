"""A worker started with another ``--job-id`` than its job's shards: the shard refuses it
(``rank 1 names another job id than the shard: ...``) and, at once, the ranks of the job left
waiting for its rank: both exit 1, and the failure report blamed whichever exited first
(``worker 0 failed with exit code 1: ...``), as the launcher read no job mismatch in the id
refusal's words. It reads them as the ranks' different jobs now: no rank is blamed, and no
restart is tried. Real ``distconv-launch local``, real ``distconv train`` workers
and shard."""

from __future__ import annotations

import pytest

from launcher.failure import Failure
from tests.other_jobs import assert_different_jobs_reported, launch_two_workers

#: ``distconv train`` with rank 1 started under another job id than the launch's
OTHER_ID = """\
import os, sys
from distconv.cli import main
if os.environ["RANK"] == "1":
    os.environ["DISTCONV_JOB_ID"] = "job8"
argv = ["train", "--data", "synthetic", "--batch-size", "8", "--epochs", "1", "--no-progress"]
sys.exit(main([*argv, "--out", sys.argv[1]]))
"""
#: the refusal, as both ranks say it (the one waiting adds what it waited in)
REFUSAL = r"rank 1 names another job id than the shard: 'job8' here, 'j7' there"


@pytest.mark.timeout(100)
def test_the_report_names_the_other_job_id_not_the_first_worker_to_exit(tmp_path):
    script = tmp_path / "other_id.py"
    script.write_text(OTHER_ID)
    flags = ["--job-id", "j7", "--max-restarts", "1"]
    done = launch_two_workers(tmp_path, flags, [str(script), str(tmp_path / "out")])
    assert_different_jobs_reported(tmp_path, done, REFUSAL)


def test_a_silent_rank_named_beside_a_refusal_is_no_mismatch():
    """At the timeout, where this job's worker of rank 1 went silent and one of another id
    claimed rank 1, the shard names the refusal inside the silent rank's failure: a peer's
    failure, blamed on rank 1, not the ranks' different jobs."""
    refusal = "rank 1 names another job id than the shard: 'job8' here, 'j7' there"
    line = (
        "distconv train: error: rank 0, step 2: pserver 127.0.0.1:5: rank 1 (host h, last step "
        f"1) sent nothing for step 2 (the push of parameter fc.weight) within 5 s (a worker of "
        f"{refusal})"
    )
    failure = Failure("worker", 0, 75, None, "l", [line], 0)
    assert failure.cause is None and not failure.different_jobs, failure
