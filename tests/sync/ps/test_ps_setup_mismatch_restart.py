"""Two workers started with different flags at setup (``--lr``, ``--data``) are refused, and
the corrected start on the same shards trains: nothing was seeded and no rank failed on its
own, so the refused start fails no shard, as a refused ``--world-size`` does not. Before,
every shard stayed failed until restarted by hand, on every shard host.

Real ``distconv train`` workers and two real shards on 127.0.0.1."""

from __future__ import annotations

import pytest
from ps_helpers import exits_within
from test_ps_second_copy_of_a_rank import TIMEOUT, _train

from distconv.sync.rate_agreement import SAME_START_RATE
from tests.child_env import child_env
from tests.processes import job_env, job_left


@pytest.mark.timeout(150)
@pytest.mark.parametrize("odd", [("--lr", "0.002"), ("--data", "digits")], ids=["lr", "data"])
def test_a_start_refused_for_different_flags_leaves_the_shards_serving(shards, tmp_path, odd):
    """Rank 1 runs with ``odd`` flags: both ranks exit 1 naming the difference, the shards
    do not fail, and the same two workers started with equal flags finish (exit 0)."""
    endpoints = shards.start(2, workers=2, extra=["--timeout", str(TIMEOUT)])
    with job_env(child_env(OMP_NUM_THREADS="1")) as env:
        flags = [("--lr", "0.001"), ("--lr", "0.001", *odd)]
        for attempt, ranks_flags in (("refused", flags), ("again", [flags[0]] * 2)):
            logs = [tmp_path / f"{attempt}{r}.log" for r in range(2)]
            procs = [
                _train(endpoints, r, tmp_path / f"{attempt}{r}", env, logs[r], "--epochs", "2",
                       *ranks_flags[r])
                for r in range(2)
            ]  # fmt: skip
            statuses = [exits_within(p, 60) for p in procs]
            said = [log.read_text()[-3000:] for log in logs]
            if attempt == "refused":
                assert statuses == [1, 1], said
                assert all("run different jobs" in text for text in said), said
                assert all(len(text.splitlines()[-1]) < 500 for text in said), said
                if odd[0] == "--lr":  # the flags named: no fit before moved a rate
                    assert any(SAME_START_RATE in text for text in said), said
            else:
                assert statuses == [0, 0], said
        assert not job_left(env, 5)
    assert "job failed" not in shards.log_text()
