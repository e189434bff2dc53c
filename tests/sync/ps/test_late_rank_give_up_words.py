"""A worker that gives up on ranks late to the start-up job check stops on one true thing.

Shard 0's answer to a job check past its ``--timeout`` ends saying the job is not failed and a
worker waiting for the late ranks says hello again; the worker that stopped after its last
round quoted that, then added that the job cannot start without them: a user reading the
launcher's failure report could not tell whether to wait. Now the stopping worker leaves that
clause out. A real ``distconv pserver`` on 127.0.0.1 and a real ``PServerSync`` of rank 0 of 2,
whose rank 1 never comes.
"""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker, shard_argv, small_net

from distconv.sync.ps.late_job_check import NOT_FAILED
from distconv.sync.ps.late_ranks import JOB_CHECK_ROUNDS, RanksLate

#: the shard's --timeout and the worker's: each of the rounds lasts it
TIMEOUT = 0.3


@pytest.mark.timeout(60)
def test_a_worker_that_gives_up_on_late_ranks_does_not_say_it_waits_for_them(shards, tmp_path):
    argv = shard_argv(["-m", "distconv"], workers=2, timeout=TIMEOUT)
    endpoint = shards.launch(argv, tmp_path / "shard0.log")
    sync = insecure_worker([endpoint], rank=0, world=2, timeout=TIMEOUT)
    try:
        with pytest.raises(RanksLate) as stopped:
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    said = str(stopped.value)
    assert stopped.value.ranks == (1,), said
    assert NOT_FAILED not in said and "says hello again" not in said, said
    late = "rank 1 (which never said hello) sent nothing for all_equal:1 (setup's job check)"
    assert f"{late} within {TIMEOUT:g} s; this worker made its job check " in said, said
    assert f"{JOB_CHECK_ROUNDS} times over " in said, said
    assert said.endswith(
        "and the ranks late to it never came: the job cannot start without them; start them, "
        f"or raise the shards' --timeout to 1/{JOB_CHECK_ROUNDS} of the longest a rank may take "
        "to start"
    ), said
    assert NOT_FAILED in shards.log_text()  # each round's answer: the rounds went on after it
