"""Workers of different jobs against a real shard, each a script run through
``distconv.distributed.run_main``: each ends with one line and exit 1, not a traceback.

The shard refuses the second hello as another job's (that rank's ``JobRefused``), and fails
the start-up gather the first waits in leading with the ranks that run different jobs (the
other's): both are the user's configuration, said as ``distconv train`` says it. So are
another job id and the workers' own job check; a shard's other error replies stay plain
``SyncError`` (their traceback stays)."""

from __future__ import annotations

import re
import sys

import pytest
from ps_helpers import insecure_worker, run_ranks, script_ranks, small_net

from distconv.rank_endings import another_id_text
from distconv.sync import JobRefused
from tests.other_jobs import OTHER_JOBS


@pytest.mark.timeout(60)
def test_workers_of_different_jobs_each_say_one_line(shards, tmp_path):
    (endpoint,) = shards.start(1, workers=2)
    script = tmp_path / "jobs.py"
    script.write_text(OTHER_JOBS)
    ended = script_ranks([sys.executable, str(script), str(tmp_path / "out")], endpoint, 40)
    said = []
    for status, err in ended:
        assert status == 1, err[-2000:]
        assert "Traceback" not in err, err[-2000:]
        (line,) = [x for x in err.splitlines() if x.startswith("jobs.py: ")]  # and a log line
        said.append(line.partition(": pserver ")[2].partition(": ")[2])
    # whichever hello came second is refused; the other rank hears of it in the gather
    # the waiting rank's line leads with the same words, then says where each rank was
    refused, waited = sorted(said, key=len)
    r = said.index(refused)  # its batch size is 2 + r, the other's 3 - r
    assert refused == (
        f"rank {r} and rank {1 - r} run different jobs: config.batch_size: "
        f"{2 + r} here, {3 - r} there (here: rank {r}'s hello; there: rank {1 - r}'s, the first "
        "the shard accepted)"
    ), refused
    assert waited.startswith(f"rank {r} and rank {1 - r} run different jobs: "), waited


@pytest.mark.timeout(30)
def test_a_worker_of_another_job_id_is_refused_as_a_job(shards):
    """The shard's refusal of another job's id is the user's configuration (the job ids
    differ) too: a JobRefused, one line from run_main."""
    endpoints = shards.start(1, workers=1, extra=["--job-id", "job7"])
    sync = insecure_worker(endpoints, job_id="job8", timeout=10)
    try:
        said = another_id_text(0, "'job8'", "'job7'")
        with pytest.raises(JobRefused, match=re.escape(said)):
            sync.setup(small_net().parameters())
    finally:
        sync.close()


@pytest.mark.timeout(30)
def test_the_workers_job_check_refuses_the_job(shards):
    """The workers' own comparison of their descriptions (a gather on shard 0) names the ranks
    that run different jobs as a JobRefused too, not a plain SyncError."""
    (endpoint,) = shards.start(1, workers=2)

    def rank_fn(rank: int) -> str:
        sync = insecure_worker([endpoint], rank=rank, world=2, timeout=10)
        try:
            sync.setup(small_net().parameters())
            with pytest.raises(JobRefused) as refused:
                sync.all_equal({"batch": 8 + rank})
        finally:
            sync.close()
        return str(refused.value)

    assert run_ranks(rank_fn, 2, timeout=20) == [
        f"rank {r} and rank {1 - r} run different jobs: batch: {8 + r} here, {9 - r} there"
        for r in (0, 1)
    ]
