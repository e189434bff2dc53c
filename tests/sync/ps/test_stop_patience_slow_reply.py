"""A large reply's time on the link does not lengthen a later stop's patience (review k336).

A stop's patience is ``QUIET_FACTOR`` times the longest silence of a shard the worker's
stoppable waits saw before, where that is longer than ``STOP_PATIENCE``. That silence was
learned as the time to each reply, bytes crossing the link included, where the stop itself
takes a shard whose reply's bytes are arriving as heard (links.py). Since 1737862 the
checkpoint's ``get_state`` (with Adam 3 to 4 times the model's bytes) is such a wait: one
healthy checkpoint over a slow link, say 60 s, made the next stop wait 180 s for a shard gone
silent, past the timeout. The stand-in shard is a real shard process whose first ``get_state``
reply comes after ``SLOW`` s, with the worker's link read saying bytes kept arriving (as a large
reply's do), and which never answers another.
"""

from __future__ import annotations

import pytest
from ps_helpers import batches, insecure_worker, shard_argv, small_net, stopping, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps import channel

PATIENCE = 1.0
SLOW = 2.0

#: ``python -m distconv`` whose first get_state reply takes SLOW s, later ones never come
SLOW_THEN_SILENT = f"""
import sys, time
from distconv.cli import main
from distconv.sync.ps.handlers import RequestHandlers

get_state, asked = RequestHandlers._op_get_state, []

def slow_then_silent(self, ident, header, arrays):
    asked.append(header)
    if len(asked) == 1:
        time.sleep({SLOW})
        get_state(self, ident, header, arrays)

RequestHandlers._op_get_state = slow_then_silent
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_slow_checkpoint_on_the_link_does_not_lengthen_the_stops_patience(
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
        with monkeypatch.context() as crossing:  # the link says bytes keep coming
            crossing.setattr(sync._handshakes, "idle", lambda shard: 0.0)
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
    assert " gave no answer to get_state in the 1 s since: " in said, said
