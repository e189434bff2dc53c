"""A shard logs its stats line where a counter moved, and an idle shard only now and then: it
wrote the same line every 30 s forever (0.8 MB a day, twice under the launcher).

A real shard process on 127.0.0.1, a real worker talking to it; the shard's periods are
shortened (due every 0.1 s, repeated unchanged every 3 s) so the test takes seconds.
"""

from __future__ import annotations

import json
import time

import pytest
from ps_helpers import REPO_ROOT, insecure_worker, small_net

from distconv.sync.ps.stats_line import STATS_UNCHANGED_EVERY

#: ``python -m distconv`` whose stats line is due every 0.1 s, repeated unchanged every 3 s
QUICK_STATS_SHARD = """
import sys
import distconv.sync.ps.server as server
import distconv.sync.ps.stats_line as stats_line
from distconv.cli import main

server.STATS_EVERY = 0.1
stats_line.STATS_UNCHANGED_EVERY = 3.0
raise SystemExit(main(sys.argv[1:]))
"""


def _stats_lines(shards) -> list[dict]:
    marker = "shard 0 stats "
    lines = [line for line in shards.log_text().splitlines() if marker in line]
    return [json.loads(line.split(marker, 1)[1]) for line in lines]


@pytest.mark.timeout(60)
def test_an_idle_shard_logs_its_unchanged_stats_once_then_only_every_so_often(shards):
    endpoint = shards.tampered(QUICK_STATS_SHARD)
    time.sleep(1.5)  # idle, the line due 15 times: said once
    assert len(_stats_lines(shards)) == 1, _stats_lines(shards)
    sync = insecure_worker([endpoint])
    try:
        sync.setup(small_net().parameters())
        sync.shard_stats()
    finally:
        sync.close()
    time.sleep(0.5)  # the job's requests moved the counters: said
    moved = _stats_lines(shards)
    assert len(moved) >= 2 and moved[-1]["bytes_in"] > 0, moved
    time.sleep(1.5)  # idle again, well inside the 3 s: nothing new
    assert _stats_lines(shards) == moved
    time.sleep(3.0)  # past 3 s since the last line: the same counters once more
    again = _stats_lines(shards)
    assert again[: len(moved)] == moved and again[len(moved) :] == [moved[-1]], again
    shards.stop()  # the exit's line says them whatever the last one said
    assert _stats_lines(shards)[-1] == moved[-1]


def test_the_docs_say_the_period_of_an_unchanged_line():
    said = (REPO_ROOT / "docs" / "operations.md").read_text()
    assert STATS_UNCHANGED_EVERY == 3600.0 and "and once an hour where none did" in said
