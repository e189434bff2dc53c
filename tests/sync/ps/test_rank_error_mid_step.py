"""A rank that stops on an error in the middle of a step, after its forward and before any push,
while the other rank waits in that step: real shards and real worker processes (the README's
``init``/``run_main`` script, ``mid_step_worker.py``), 2 workers on 1 or 2 shards.

Rank 0 is refused by ``loss_rows_checked`` (a ``DataError`` naming ``mean_over``); the
Trainer abandons the step (which tells the shards, with the error) and the error closes the
sync on its way out, so its ``bye`` carries it too. Rank 1, whose share of that step is empty,
has handed over every gradient and waits for the step's values. In sync mode each shard holds
rank 1's push when rank 0's ``abandon`` comes and fails the step at once, naming rank 0's
error; in async mode nothing waits for the push, and
rank 1 stops at the ranks' next meeting (the stop check after step 8, or the epoch's end),
which rank 0 left: the shard names its error there. Either way rank 1 exits 75 (another rank
failed) with rank 0's error in its message, rank 0 exits 1 with its own, and neither is left
running.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from ps_helpers import script_ranks

WORKER = Path(__file__).with_name("mid_step_worker.py")
#: rank 0's error, as both ranks say it
CAUSE = (
    "DataError: SoftmaxCrossEntropy 'loss' takes its mean over 2 rows, but the batch of 2 "
    "sequence(s) of 'labelled' counts 1 rows"
)
#: the most seconds from rank 0's error to rank 1's stop: the shard's timeout is 60 s, and
#: rank 1's steps after it (async) take milliseconds
PROMPT = 5.0


def _stopped_at(err: str, rank: int) -> float:
    """When ``rank`` said its error left ``main`` (``mid_step_worker.py``'s line)."""
    found = re.search(rf"^rank {rank} stopped at ([0-9.]+)$", err, re.MULTILINE)
    assert found, err[-3000:]
    return float(found.group(1))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("num_shards", [1, 2])
def test_the_other_rank_stops_at_once_naming_the_error(shards, mode, num_shards):
    endpoints = shards.start(num_shards, workers=2, mode=mode)
    (status0, err0), (status1, err1) = script_ranks(
        [sys.executable, str(WORKER)], ",".join(endpoints), 30
    )
    assert status0 == 1, err0[-3000:]
    assert f"mid_step_worker.py: error: {CAUSE}" in err0, err0[-3000:]
    assert "mean_over='sequences'" in err0, err0[-3000:]
    assert status1 == 75, err1[-3000:]  # stopped by rank 0's failure, not killed by the test
    # the line that says why, rank 1's last one: rank 0 and its error, quoted
    last = err1.strip().splitlines()[-1]
    assert last.startswith("distconv.sync.peers.PeerFailed: rank 1, "), last
    # sync: told by rank 0's abandon, in the step it left (its second); async: by its bye
    ended = "abandoned step 2 on" if mode == "sync" else "closed on"
    assert "rank 0 (host " in last and f'{ended} "{CAUSE}' in last, last
    if mode == "sync":
        assert "rank 1, step 2: " in last and "rank 1 (step 2) waits for its push" in last, last
    # from rank 0's error leaving main (rank 1 may stop before: told by rank 0's abandon)
    waited = _stopped_at(err1, 1) - _stopped_at(err0, 0)
    assert waited < PROMPT, (waited, err1[-3000:])
    log = shards.log_text()
    assert f'{ended} "{CAUSE}' in log, log[-3000:]  # the operator of the shards reads it too
