"""A parameter-server rank whose setup is given arrays, not Parameters, tells the other rank at
once (``fail_setup``, from setup's own refusal), which raises naming it, not waiting for its
hello until the shard's timeout. Two worker threads on a real shard on 127.0.0.1 port 0."""

from __future__ import annotations

import time

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard
from tests.sync.ps.ps_helpers import run_ranks, served, small_net

#: the shard's --timeout: a rank not told waits this long for the other's hello
SHARD_TIMEOUT = 20.0


@pytest.mark.timeout(60)
def test_a_rank_given_arrays_tells_the_other_at_once():
    shard = Shard(ShardConfig(bind="127.0.0.1:0", workers=2, insecure=True, timeout=SHARD_TIMEOUT))

    def rank(r: int) -> BaseException | None:
        sync = PServerSync(
            create_optimizer("sgd", lr=0.1), rank=r, world_size=2, pservers=[endpoint],
            insecure=True, timeout=SHARD_TIMEOUT,
        )  # fmt: skip
        with sync:
            try:
                sync.setup([np.zeros(3)] if r == 1 else small_net().parameters())
            except Exception as exc:  # each rank's own error, checked below
                return exc
        return None

    with served(shard) as running:
        endpoint = running.endpoint
        began = time.monotonic()
        told, refused = run_ranks(rank, 2, timeout=SHARD_TIMEOUT + 20)
        took = time.monotonic() - began
    assert isinstance(refused, TypeError) and "item 0 is a numpy.ndarray" in str(refused)
    assert told is not None and "rank 1 could not set up" in str(told), told
    assert "item 0 is a numpy.ndarray" in str(told), told
    assert took < SHARD_TIMEOUT / 2, took
