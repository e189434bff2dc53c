"""A refused hello's ``bye`` closes its rank only while the rank's accepted worker is silent: a
refused worker closes at once, and where it was the rank's restart the ranks waiting for it
learn why now (``test_ps_stuck.py``); where the rank's accepted worker speaks on after the
refusal, the refused one was a stray (another job's worker given this job's shards), and its
bye closed the live rank, failing the job."""

from __future__ import annotations

import pytest
from test_ps_stuck import _bye, _refused_restart


@pytest.mark.timeout(30)
def test_a_refused_stray_s_bye_is_ignored_while_the_rank_s_worker_speaks_on(hand):
    """Rank 0 waits in its start-up gather; rank 1's run 11 was accepted, a stray's hello for
    rank 1 (run 33, another job) refused; run 11 beats after the refusal, so run 33's bye is
    not rank 1's: the shard has not failed and rank 1 has not closed."""
    h = hand(workers=2)
    _refused_restart(h)
    assert h.ask({"op": "beat", "rank": 1, "run": 11})[0]["op"] == "ok"
    _bye(h, 1, run=33)
    assert not h.shard.failed and 1 not in h.shard.left
    _bye(h, 1, run=11)  # the rank's own worker closes: that bye counts
    said = h.read()[0]["error"]  # rank 0's start-up gather: this start ended, failing nothing
    assert said.startswith("rank 1 runs another job"), said
    assert not h.shard.failed
