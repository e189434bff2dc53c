"""An async checkpoint against a shard of a release before ``get_state``'s ``with_values``
names what is wrong.

A shard ignores header fields it does not know, so one of an older release answers the async
chief's ``get_state`` with the state alone. The worker failed at its first checkpoint, after
an epoch of training, with ``malformed reply from a pserver: 0 versions for 5 blocks``, which
says neither what was missing nor why. It now says the values asked for are missing, as an
older shard answers, and to run workers and shards of the same release. The stand-in for the
older shard is a real shard process whose ``get_state`` handler drops the field first.
"""

from __future__ import annotations

import re

import pytest
from ps_helpers import (
    insecure_worker,
    refused_without_writing,
    shard_argv,
    small_net,
)

from distconv.sync.base import SyncError
from distconv.sync.ps.client import PServerSync

#: ``python -m distconv`` with a get_state handler that does not know ``with_values``
OLDER_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.handlers import RequestHandlers

current = RequestHandlers._op_get_state

def older(self, ident, header, arrays):
    header.pop("with_values", None)
    current(self, ident, header, arrays)

RequestHandlers._op_get_state = older
raise SystemExit(main(sys.argv[1:]))
"""


def shard_command(shard: int, shards: int, workers: int, older: bool) -> list[str]:
    """An async shard's command line: of this release, or of an older one (``older``)."""
    start = ["-c", OLDER_SHARD] if older else ["-m", "distconv"]
    return shard_argv(start, shard=shard, shards=shards, workers=workers, mode="async")


@pytest.mark.timeout(60)
def test_an_older_shard_that_ignores_with_values_is_named_as_one(shards, tmp_path):
    endpoint = shards.launch(shard_command(0, 1, 1, older=True), tmp_path / "older-shard.log")
    sync = insecure_worker([endpoint], optimizer="adam", timeout=10)
    try:
        sync.setup(small_net().parameters())
        with pytest.raises(SyncError) as raised:
            sync.state_dict()
    finally:
        sync.close()
    said = str(raised.value)
    assert "get_state reply without the values it was asked for (with_values)" in said, said
    assert "run workers and shards of the same release" in said, said
    assert said.endswith(f"(pserver shard 0 ({endpoint}))"), said


@pytest.mark.timeout(90)
def test_a_job_with_one_older_shard_writes_no_values_of_the_others(shards, tmp_path):
    """Every reply is looked at before any value is written: shard 0's values (of this
    release) were written into the chief's parameters before shard 1's reply (an older one's)
    was refused, half a model of another moment (and on a GPU, host copies the device lacks)."""
    refused, _ = refused_without_writing(
        shards, tmp_path, lambda s: shard_command(s, 2, 2, older=s == 1), PServerSync.state_dict
    )
    assert re.search(r"without the values it was asked for .* shard 1 ", str(refused)), refused
