"""A shard that sends many replies to no awaited request cannot flood the worker's log.

Each ignored reply was logged with a warning of its own, so a shard sending thousands (a bug, a
loop answering every request again) wrote thousands of lines to every worker's log. The first
few of a shard in a while are logged in full, then only the count of those not logged at each
power of ten. The shard is a
real shard process whose replies to pulls go out many times.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from ps_helpers import insecure_worker, shard_argv, small_net

from distconv.sync.ps import intake

#: ``python -m distconv`` that answers each pull with more replies first, as many as the file
#: argv[1] says when the pull comes (``COUNT [TEXT]``), each an error reply with TEXT (default
#: ``no such request``) and an id never sent (an error reply of id -1 to a request awaited
#: fails the wait: test_unread_request_reply)
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

path = sys.argv.pop(1)
NEVER_SENT = 2**40
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "pull":
        copies, _, text = open(path).read().partition(" ")
        for _ in range(int(copies)):
            reply(self, ident, {**request, "id": NEVER_SENT}, (), text or "no such request")
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


def stray_shard(shards, tmp_path, said: str) -> tuple[str, Path]:
    """A tampered shard's endpoint and the file that says its strays (``said`` at first)."""
    said_file = tmp_path / "strays"
    said_file.write_text(said)
    argv = shard_argv(["-c", TAMPERED_SHARD, str(said_file)])
    return shards.launch(argv, tmp_path / "shard.log"), said_file


def ignored(caplog) -> list[str]:
    """The worker's lines about ignored replies."""
    return [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]


@pytest.mark.timeout(90)
def test_many_stray_replies_of_a_shard_log_a_few_lines(shards, tmp_path, caplog):
    endpoint, _ = stray_shard(shards, tmp_path, "600")
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
    lines = ignored(caplog)
    assert 5 <= len(lines) <= 12, (len(lines), lines[:3])
    assert "no such request" in lines[0]
    assert "1000 replies" in lines[-1], lines[-1]  # the count goes on being told


@pytest.mark.timeout(90)
def test_strays_after_a_quiet_while_are_logged_in_full_again(shards, tmp_path, caplog, monkeypatch):
    """The count ran for the whole run: once a shard's first strays were logged, a later burst
    (hours on, another cause, its error text new) logged nothing until the next power of ten
    (here 601 to 999: nothing). A shard quiet for ``STRAYS_WINDOW`` is logged in full again."""
    monkeypatch.setattr(intake, "STRAYS_WINDOW", 1.0)
    endpoint, _ = stray_shard(shards, tmp_path, "600")
    sync = insecure_worker([endpoint])
    caplog.set_level(logging.WARNING, logger="distconv.pserver")
    try:
        sync.setup(small_net().parameters())
        sync._pull_all()
        time.sleep(1.5)  # quiet for longer than STRAYS_WINDOW
        caplog.clear()
        sync._pull_all()
    finally:
        sync.close()
    lines = ignored(caplog)
    assert len(lines) >= intake.STRAYS_LOGGED, lines
    assert all("no such request" in line for line in lines[: intake.STRAYS_LOGGED]), lines


@pytest.mark.timeout(90)
def test_a_burst_after_a_trickle_of_strays_is_logged_in_full(shards, tmp_path, caplog, monkeypatch):
    """The count started again only after 10 minutes without a stray: a shard sending one
    now and then (a trickle, each logged) kept its count going, so a later burst (another
    cause, its own error text) was counted, not shown: past the fifth stray of the run, only
    the count at each power of ten. A shard's strays are logged in full up to
    ``STRAYS_LOGGED`` per ``STRAYS_WINDOW``, whatever came long before."""
    monkeypatch.setattr(intake, "STRAYS_WINDOW", 2.0)  # 5 in full every 2 s: 2.5 a second
    endpoint, said = stray_shard(shards, tmp_path, "1 trickle")
    sync = insecure_worker([endpoint])
    caplog.set_level(logging.WARNING, logger="distconv.pserver")
    try:
        sync.setup(small_net().parameters())
        for _ in range(8):  # a stray every 0.5 s: 2 a second
            sync._pull_all()
            time.sleep(0.5)
        trickle = ignored(caplog)
        caplog.clear()
        said.write_text("600 burst")
        sync._pull_all()
    finally:
        sync.close()
    assert len(trickle) == 8 and all("trickle" in line for line in trickle), trickle
    burst = ignored(caplog)
    shown = [line for line in burst if "burst" in line]
    assert len(shown) >= intake.STRAYS_LOGGED - 1, burst  # the window's refill, give or take
    assert len(burst) <= intake.STRAYS_LOGGED + 3, burst  # then the counts: 1, 10, 100
    assert "replies of this shard ignored and not logged" in burst[-1], burst[-1]
