"""A hello refused for its ``host`` (over 255 characters, or not printable) is a
worker that cannot join, like one of another job: its bye counts, so the ranks waiting for it
in the start-up gather are told at once why, instead of "sent nothing" at the timeout (60 s
here). Real shard, workers in threads."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks

from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.peers import PeerFailed
from distconv.sync.ps import processes, worker_hello


@pytest.mark.timeout(120)
def test_the_other_ranks_are_told_at_once_why_a_hello_was_refused(shards, monkeypatch):
    (endpoint,) = shards.start(1, workers=2, extra=["--timeout", "60"])
    real = processes.whoami
    names = {}

    def whoami():
        here = real()
        bad = names.get(threading.get_ident())
        return {**here, "host": bad} if bad else here

    # rank 1's thread says a host with a newline
    monkeypatch.setattr(worker_hello, "whoami", whoami)

    def body(rank: int) -> str:
        if rank == 1:
            names[threading.get_ident()] = "h\nrank 0 closed"
            time.sleep(1)  # rank 0 waits in the start-up gather first
        sync = insecure_worker([endpoint], rank=rank, world=2, timeout=60)
        began = time.monotonic()
        try:
            try:
                sync.setup([Parameter("w", np.zeros(3))], {})
            finally:
                sync.close()  # with the error propagating: its bye carries it, as a fit's does
        except SyncError as exc:
            ranks = exc.ranks if isinstance(exc, PeerFailed) else None  # a victim: rank 1 failed
            return f"{time.monotonic() - began:.0f} {ranks} {exc}"
        return "joined"

    told, refused = run_ranks(body, 2)
    assert "not printable" in refused, refused
    seconds, ranks, why = told.split(" ", 2)
    assert int(seconds) < 20 and "rank 1" in why and "not printable" in why, told
    # rank 1 is the cause (its host), not a rank of another job: rank 0 is its victim, a
    # PeerFailed naming it (distconv train's exit 75), as at the timeout before
    assert ranks == "(1,)", told
