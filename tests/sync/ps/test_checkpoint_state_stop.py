"""A stop cuts short the chief's ``get_state`` wait, as it does a pull's.

A shard answers ``get_state`` at once, waiting for no worker, as it does ``pull`` and ``stats``.
Yet the checkpoint's ``get_state`` (an async chief's with values, a sync chief's without) was
not a stoppable wait: a shard that answered the ``stats`` before it and then went silent held a
stopping chief for the whole timeout (here 1.5 x 20 s), where a silent shard's pull is given up
after the stop's patience. The stand-in shard is a real shard process that answers every
request but ``get_state``.
"""

from __future__ import annotations

import re
import time

import pytest
from ps_helpers import asked_to_stop, batches, insecure_worker, shard_argv, small_net, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps import channel

PATIENCE = 1.0
TIMEOUT = 20.0

#: ``python -m distconv`` that never answers a ``get_state``
SILENT_TO_GET_STATE = """
import sys
from distconv.cli import main
from distconv.sync.ps.handlers import RequestHandlers

RequestHandlers._op_get_state = lambda self, ident, header, arrays: None
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stopping_chief_gives_up_a_get_state_a_shard_does_not_answer(
    shards, tmp_path, monkeypatch, mode
):
    monkeypatch.setattr(channel, "STOP_PATIENCE", PATIENCE)
    endpoint = shards.launch(
        shard_argv(["-c", SILENT_TO_GET_STATE], mode=mode, timeout=TIMEOUT), tmp_path / "shard.log"
    )
    net = small_net()
    sync = insecure_worker([endpoint], optimizer="adam", timeout=TIMEOUT)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 8))
        with asked_to_stop():
            began = time.monotonic()
            with pytest.raises(SyncError) as raised:
                sync.checkpoint_state()
            took = time.monotonic() - began
    finally:
        sync.close()
    said = str(raised.value)
    stopped = f"rank 0: asked to stop (SIGTERM), and pserver shard(s) 0 ({endpoint}) gave no"
    assert said.startswith(f"{stopped} answer to get_state in the "), said
    giving_up = "a shard answers stats and get_state at once, waiting for no worker, so it is"
    assert re.search(rf"s since: {giving_up} gone or stuck; giving up the checkpoint$", said), said
    assert took < 10, took  # the patience, not the timeout
