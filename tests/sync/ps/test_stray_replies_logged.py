"""A shard that sends many replies to no awaited request cannot flood the worker's log
(review k345).

Each ignored reply was logged with a warning of its own, so a shard sending thousands (a bug, a
loop answering every request again) wrote thousands of lines to every worker's log. The first
few of a shard are logged in full, then only its counts at each power of ten. The shard is a
real shard process whose replies to pulls go out many times.
"""

from __future__ import annotations

import logging
import time

import pytest
from ps_helpers import insecure_worker, shard_argv, small_net

from distconv.sync.ps import intake

#: ``python -m distconv`` that answers each pull COPIES times more (argv[1]), with an id never
#: sent (an error reply of id -1 to a request awaited fails the wait: test_unread_request_reply)
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

copies = int(sys.argv.pop(1))
NEVER_SENT = 2**40
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "pull":
        for _ in range(copies):
            reply(self, ident, {**request, "id": NEVER_SENT}, (), "no such request")
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(90)
def test_many_stray_replies_of_a_shard_log_a_few_lines(shards, tmp_path, caplog):
    copies = 600
    endpoint = shards.launch(
        shard_argv(["-c", TAMPERED_SHARD, str(copies)]), tmp_path / "shard.log"
    )
    net = small_net()
    sync = insecure_worker([endpoint])
    caplog.set_level(logging.WARNING, logger="distconv.pserver")
    try:
        sync.setup(net.parameters())
        sync._pull_all()  # each pull's strays arrive before its answer
        sync._pull_all()
        assert len(sync.shard_stats()) == 1  # every stray read by now
    finally:
        sync.close()
    lines = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert 5 <= len(lines) <= 12, (len(lines), lines[:3])
    assert "no such request" in lines[0]
    assert "1000 replies" in lines[-1], lines[-1]  # the count goes on being told


@pytest.mark.timeout(90)
def test_strays_after_a_quiet_while_are_logged_in_full_again(shards, tmp_path, caplog, monkeypatch):
    """The count ran for the whole run: once a shard's first strays were logged, a later burst
    (hours on, another cause, its error text new) logged nothing until the next power of ten
    (here 601 to 999: nothing). A shard quiet for ``STRAYS_QUIET`` starts a new count."""
    monkeypatch.setattr(intake, "STRAYS_QUIET", 1.0)
    endpoint = shards.launch(shard_argv(["-c", TAMPERED_SHARD, "600"]), tmp_path / "shard.log")
    sync = insecure_worker([endpoint])
    caplog.set_level(logging.WARNING, logger="distconv.pserver")
    try:
        sync.setup(small_net().parameters())
        sync._pull_all()
        time.sleep(1.5)  # quiet for longer than STRAYS_QUIET
        caplog.clear()
        sync._pull_all()
    finally:
        sync.close()
    lines = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert len(lines) >= intake.STRAYS_LOGGED, lines
    assert all("no such request" in line for line in lines[: intake.STRAYS_LOGGED]), lines
