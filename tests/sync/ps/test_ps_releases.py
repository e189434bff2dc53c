"""Workers and shards of other distconv builds (a shard run from a copy of the source, edited):
another protocol version is named with both versions and the way on, not as a malformed
reply."""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker, small_net

from distconv.sync.base import SyncError
from tests.source_copy import copy_source, edit

pytestmark = pytest.mark.timeout(60)

WAY_ON = "run workers and shards of the same release"


def started(shards, tmp_path, mode: str = "sync", **edits: tuple[str, str]) -> str:
    """One shard of a one-worker job run from a copy of the source with ``edits`` (a file:
    its text and its replacement); its endpoint."""
    copy = copy_source(tmp_path / "copy")
    for path, (old, new) in edits.items():
        edit(copy, path.replace("__", "/") + ".py", old, new)
    (endpoint,) = shards.start(1, 1, mode=mode, source=copy)
    return endpoint


def set_up(endpoint: str) -> None:
    """A worker of :func:`small_net` set up on ``endpoint``, then closed."""
    sync = insecure_worker([endpoint])
    try:
        sync.setup(small_net().parameters())
    finally:
        sync.close()


def test_a_shard_of_another_protocol_version_is_named_with_both(shards, tmp_path):
    wire = ("PROTOCOL_VERSION = 7\n", "PROTOCOL_VERSION = 6\n")
    endpoint = started(shards, tmp_path, distconv__sync__ps__wire=wire)
    with pytest.raises(SyncError) as refused:
        set_up(endpoint)
    assert str(refused.value) == (
        f"rank 0: pserver shard 0 ({endpoint}) answers in protocol version 6, this worker "
        f"speaks 7: it runs another release of distconv; {WAY_ON}"
    )
    # the shard refused the worker's hello in the same words, its way on said too
    assert f"protocol version 7, expected 6: another release of distconv; {WAY_ON}" in (
        shards.log_text()
    )
