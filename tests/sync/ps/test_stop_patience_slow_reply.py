"""A slow reply and a stop's patience: the silence before a reply counts, its bytes' time on the
link does not.

A stop's patience is ``QUIET_FACTOR`` times the longest silence of a shard the worker's
stoppable waits saw before, where that is longer than ``STOP_PATIENCE``. The stand-in shard is
a real shard process whose first ``get_state`` reply comes after a delay, with the worker's link
read (``idle``) saying when bytes came, and which never answers another: the second
``checkpoint_state``, at a stop, is given up after the patience, which its message names.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from ps_helpers import asked_to_stop, batches, insecure_worker, shard_argv, small_net, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps import channel

PATIENCE = 1.0


def slow_then_silent(seconds: float) -> str:
    """``python -m distconv`` whose first get_state reply takes ``seconds``, later ones never."""
    return f"""
import sys, time
from distconv.cli import main
from distconv.sync.ps.handlers import RequestHandlers

get_state, asked = RequestHandlers._op_get_state, []

def slow_then_silent(self, ident, header, arrays):
    asked.append(header)
    if len(asked) == 1:
        time.sleep({seconds})
        get_state(self, ident, header, arrays)

RequestHandlers._op_get_state = slow_then_silent
raise SystemExit(main(sys.argv[1:]))
"""


def stop_after_a_slow_checkpoint(
    shards, tmp_path, monkeypatch, mode: str, seconds: float, idle: Callable[[float], float]
) -> str:
    """A checkpoint whose reply takes ``seconds``, the link read saying ``idle(since the
    ask)``; then one at a stop, never answered: the message it is given up with."""
    monkeypatch.setattr(channel, "STOP_PATIENCE", PATIENCE)
    endpoint = shards.launch(
        shard_argv(["-c", slow_then_silent(seconds)], mode=mode, timeout=20),
        tmp_path / "shard.log",
    )
    net = small_net()
    sync = insecure_worker([endpoint], optimizer="adam", timeout=20)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 8))
        asked = time.monotonic()
        with monkeypatch.context() as link:
            link.setattr(sync._handshakes, "idle", lambda shard: idle(time.monotonic() - asked))
            sync.checkpoint_state()
        with asked_to_stop():
            with pytest.raises(SyncError) as raised:
                sync.checkpoint_state()
    finally:
        sync.close()
    return str(raised.value)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_slow_checkpoint_on_the_link_does_not_lengthen_the_stops_patience(
    shards, tmp_path, monkeypatch, mode
):
    """The silence was learned as the time to each reply, bytes crossing the link included,
    where the stop itself takes a shard whose reply's bytes are arriving as heard (links.py):
    one healthy checkpoint over a slow link, say 60 s, made the next stop wait 180 s for a
    shard gone silent, past the timeout. Here the link says bytes kept coming."""
    said = stop_after_a_slow_checkpoint(shards, tmp_path, monkeypatch, mode, 2.0, lambda _: 0.0)
    waited = re.search(r" gave no answer to get_state in the ([0-9.]+) s since: ", said)
    assert waited, said
    # the floor (PATIENCE), or 3 x a step's own silence where load stretched one past a third
    # of it (1.03 s seen beside two xdist workers and four other jobs); the checkpoint's 2 s
    # on the link would have made it 3 x 2 s
    assert PATIENCE <= float(waited.group(1)) < channel.QUIET_FACTOR * 1.0, said


#: above PATIENCE, so a patience learned from it (3 x) is told from the floor's
SILENT = 1.2
#: longer than a poll (POLL_SLICE), so the reply's bytes cross over several
CROSSING = 0.6


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_silence_before_a_long_crossing_sets_the_stops_patience(
    shards, tmp_path, monkeypatch, mode
):
    """Counting the silence as of the poll before the reply arrived taught nothing where a
    reply's bytes cross for longer than a poll (``POLL_SLICE``), not even the silence before
    its first byte: a live shard waiting that long for a slow peer every step, whose replies
    are large, left the patience at ``STOP_PATIENCE``, and a stop gave it up as gone. Here the
    link says no bytes came for ``SILENT`` s, then that bytes kept coming."""

    def idle(since: float) -> float:
        return since if since < SILENT else 0.0

    said = stop_after_a_slow_checkpoint(
        shards, tmp_path, monkeypatch, mode, SILENT + CROSSING, idle
    )
    waited = re.search(r" gave no answer to get_state in the ([0-9.]+) s since: ", said)
    assert waited, said
    # 3 x the silence the stop saw before the bytes came (SILENT, less a poll at most)
    assert float(waited.group(1)) >= channel.QUIET_FACTOR * (SILENT - channel.POLL_SLICE), said
