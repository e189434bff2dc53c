"""A silence that a slow reply's crossing ends still sets a later stop's patience (review k337).

6bdf601 counts the silence a stop's patience learns at each reply from when the shard was last
heard as of the poll before the reply arrived, so that a large reply's time on the link teaches
no silence. But a reply whose bytes cross for longer than a poll (``POLL_SLICE``) then teaches
nothing at all, not even the silence before its first byte: a live shard waiting that long for a
slow peer every step, whose replies are large, left the patience at ``STOP_PATIENCE``, and a stop
gave it up as gone. The stand-in shard is a real shard process whose first ``get_state`` reply
comes after ``SILENT + CROSSING`` s; the worker's link read says no bytes came for ``SILENT`` s,
then that bytes kept coming; it never answers another ``get_state``.
"""

from __future__ import annotations

import re
import time

import pytest
from ps_helpers import batches, insecure_worker, shard_argv, small_net, stopping, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps import channel

PATIENCE = 1.0
SILENT = 2.0
CROSSING = 1.0

#: ``python -m distconv`` whose first get_state reply takes SILENT + CROSSING s, later ones never
SLOW_THEN_SILENT = f"""
import sys, time
from distconv.cli import main
from distconv.sync.ps.handlers import RequestHandlers

get_state, asked = RequestHandlers._op_get_state, []

def slow_then_silent(self, ident, header, arrays):
    asked.append(header)
    if len(asked) == 1:
        time.sleep({SILENT + CROSSING})
        get_state(self, ident, header, arrays)

RequestHandlers._op_get_state = slow_then_silent
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_silence_before_a_long_crossing_sets_the_stops_patience(
    shards, tmp_path, monkeypatch, mode
):
    monkeypatch.setattr(channel, "STOP_PATIENCE", PATIENCE)
    endpoint = shards.launch(
        shard_argv(["-c", SLOW_THEN_SILENT], mode=mode, timeout=20), tmp_path / "shard.log"
    )
    net = small_net()
    sync = insecure_worker([endpoint], optimizer="adam", timeout=20)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 8))
        asked = time.monotonic()

        def idle(shard: int) -> float:  # silent for SILENT s after the ask, then bytes coming
            since = time.monotonic() - asked
            return since if since < SILENT else 0.0

        with monkeypatch.context() as link:
            link.setattr(sync._handshakes, "idle", idle)
            sync.checkpoint_state()
        restore = stopping()
        try:
            with pytest.raises(SyncError) as raised:
                sync.checkpoint_state()
        finally:
            restore()
    finally:
        sync.close()
    said = str(raised.value)
    waited = re.search(r" gave no answer to get_state in the ([0-9.]+) s since: ", said)
    assert waited, said
    # 3 x the silence the stop saw before the bytes came (SILENT, less a poll at most)
    assert float(waited.group(1)) >= channel.QUIET_FACTOR * (SILENT - channel.POLL_SLICE), said
