"""An async shard logs its first dropped push at INFO and the rest at DEBUG: a line for each
(one per parameter and push) was 352 INFO lines in one epoch of two workers at
``--max-staleness 0``. The stats line's ``drops`` still counts every one."""

from __future__ import annotations

import logging

import pytest
from hand_shard import BLOCKS
from test_ps_push_versions import _push


@pytest.mark.timeout(60)
def test_only_the_first_drop_is_an_info_line(hand, caplog):
    h = hand(mode="async", max_staleness=0)
    h.seed()
    assert h.ask(*_push(1, [0] * BLOCKS))[0]["op"] == "ok"
    with caplog.at_level(logging.DEBUG, logger="distconv.pserver"):
        for step in (2, 3, 4):  # each 1 update stale, bound 0: dropped
            assert h.ask(*_push(step, [0] * BLOCKS))[0]["dropped"] == 1
    drops = [r for r in caplog.records if "dropped a push" in r.getMessage()]
    assert [r.levelno for r in drops] == [logging.INFO] + [logging.DEBUG] * 2, drops
    assert "further drops are counted in the stats line" in drops[0].getMessage()
    assert h.shard.stats.drops == 3


@pytest.mark.timeout(60)
def test_a_drop_counts_its_updates_in_words(hand, caplog):
    """One update stale is said "1 update stale", not "1 updates"."""
    h = hand(mode="async", max_staleness=0)
    h.seed()
    with caplog.at_level(logging.DEBUG, logger="distconv.pserver"):
        for step, versions in enumerate(([0], [0], [1], [0]), start=1):
            h.ask(*_push(step, versions * BLOCKS))  # the blocks at 1, then 2: stale by 1, 2
    said = [r.getMessage().split(": ")[-1] for r in caplog.records if "dropped" in r.getMessage()]
    assert [s.split(";")[0] for s in said] == ["1 update stale (max 0)", "2 updates stale (max 0)"]
