"""A job whose ranks run different jobs: every worker stops on the mismatch, each saying so,
and the report names the mismatch, not the worker that happened to exit first as the one that
failed (it blamed ``worker 0 failed with exit code 1``, or worker 1, by a race).
Real ``distconv-launch local``, real ``distconv train`` workers and shard."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.other_jobs import assert_different_jobs_reported, launch_two_workers

OTHER_JOB = Path(__file__).with_name("ps_train_other_job.py")
#: what differs, whichever rank's hello the shard took first
MISMATCH = (
    r"rank [01] and rank [01] run different jobs: config\.batch_size: (16 here, 8|8 here, 16) "
    r"there \(here: rank [01]'s hello"
)


@pytest.mark.timeout(100)
def test_the_report_names_the_mismatch_not_the_first_worker_to_exit(tmp_path):
    # restarts allowed: a mismatch is not retried, every attempt would stop on it again
    program = [str(OTHER_JOB), str(tmp_path / "out")]
    done = launch_two_workers(tmp_path, ["--max-restarts", "2"], program)
    report = assert_different_jobs_reported(tmp_path, done, MISMATCH)
    said = done.stderr + done.stdout[-3000:]
    assert report["exit_code"] == 1, report
    unused = "not restarting (--max-restarts 2): the ranks run different jobs"
    assert unused in done.stderr, said
    # the report says why the restarts allowed were not used, not null
    assert (report["then"] or "").startswith(unused), report
