"""``Shards.launch`` waits a bounded time for a shard to say it listens.

It read the shard's first line with a bare ``readline()``: a shard that never printed (stuck
at start-up, waiting on something) held the test until pytest-timeout, whose report said
nothing of the shard, and the process stayed behind where the timeout skipped the teardown.
Now the test fails within ``start_seconds`` with the shard's stderr, and the shard is killed.
"""

from __future__ import annotations

import sys
import time

import pytest
from ps_helpers import Shards

#: a "shard" that says something on stderr and then nothing, for ever
SILENT = (
    "import sys, time\nprint('stuck before binding', file=sys.stderr, flush=True)\ntime.sleep(600)"
)


@pytest.mark.timeout(20)
def test_a_shard_that_never_says_it_listens_fails_the_test_and_is_killed(tmp_path):
    shards = Shards(tmp_path)
    shards.start_seconds = 2.0
    began = time.monotonic()
    try:
        with pytest.raises(pytest.fail.Exception) as failed:
            shards.launch([sys.executable, "-c", SILENT], tmp_path / "silent.log")
        waited = time.monotonic() - began
        proc = shards.procs[0]
        assert proc.poll() is not None, "the silent shard was left running"
    finally:
        shards.stop()
    said = str(failed.value)
    assert "did not say it listens within 2.0 s" in said, said
    assert "stuck before binding" in said, said  # its stderr
    assert waited < 10, waited


@pytest.mark.timeout(20)
def test_a_shard_that_exits_at_once_fails_with_its_stderr(tmp_path):
    shards = Shards(tmp_path)
    try:
        with pytest.raises(pytest.fail.Exception) as failed:
            code = "import sys; sys.exit('no such option')"
            shards.launch([sys.executable, "-c", code], tmp_path / "gone.log")
    finally:
        shards.stop()
    said = str(failed.value)
    assert "exited with status 1" in said and "no such option" in said, said


@pytest.mark.timeout(60)
def test_a_real_shard_still_starts(tmp_path):
    shards = Shards(tmp_path)
    try:
        (endpoint,) = shards.start(1, workers=1)
    finally:
        shards.stop()
    host, port = endpoint.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
