"""Workers and shards of other distconv builds (a shard run from a copy of the source, edited):
another protocol version is named with both versions and the way on, not as a malformed reply;
another build warns at setup, naming the shard; an async shard without ``with_values`` is
refused at setup, where its first checkpoint failed the job; a shard of the previous release
(no build, no features said) still serves, with a warning; and one without ``abandon`` is sent
none."""

from __future__ import annotations

import logging

import msgpack
import pytest
import zmq
from ps_helpers import insecure_worker, raw_dealer, small_net

import distconv
from distconv.data import DataError
from distconv.sync.base import SyncError
from distconv.sync.ps.wire import unpack_header
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


def warned(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "distconv.sync.ps"]


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


def test_a_header_without_an_integer_version_is_not_called_another_release(shards):
    """No ``v``, or one that is no integer (true, "7"): no distconv of any release sent it, so
    the shard's refusal names the version it read, not another release and its way on."""
    (endpoint,) = shards.start(1, 1)
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    errors = []
    try:
        for version in ({}, {"v": True}, {"v": "7"}):
            header = {"op": "pull", "id": 5, "job": "local", "blocks": [], **version}
            raw.send_multipart([msgpack.packb(header)])
            assert raw.poll(10_000), "no reply within 10 s"
            errors.append(unpack_header(raw.recv_multipart()[0], request=False)["error"])
    finally:
        raw.close(0)
        ctx.term()
    assert errors == [
        "protocol version None, expected 7",
        "protocol version True, expected 7",
        "protocol version '7', expected 7",
    ]


def test_a_shard_of_another_build_is_named_at_setup_and_serves(shards, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="distconv.sync.ps")
    optim = ("one update rule each", "one update rule each (edited)")
    endpoint = started(shards, tmp_path, distconv__optim=optim)
    set_up(endpoint)
    [said] = warned(caplog)
    theirs = said.split(": distconv ")[1].split(";")[0]
    assert theirs != distconv.build_id() and theirs.startswith(f"{distconv.__version__}+")
    assert said == (
        f"pserver shards run another distconv than this worker ({distconv.build_id()}): "
        f"shard 0 ({endpoint}): distconv {theirs}; the job goes on, but each runs its own "
        "code: run workers and shards of the same build"
    )


def test_an_async_shard_without_with_values_is_refused_at_setup(shards, tmp_path):
    features = ('FEATURES = ("with_values", "abandon")', "FEATURES = ()")
    endpoint = started(shards, tmp_path, "async", distconv__sync__ps__releases=features)
    with pytest.raises(SyncError) as refused:
        set_up(endpoint)
    assert str(refused.value) == (
        f"rank 0: pserver shard 0 ({endpoint}) cannot return its values with its optimizer "
        "state (with_values), which an async job's checkpoints need: it runs another release "
        f"of distconv; {WAY_ON}"
    )


def test_a_shard_of_the_previous_release_serves_with_a_warning(shards, tmp_path, caplog):
    """The copy says no build and no features, as the release before them: it still serves."""
    caplog.set_level(logging.WARNING, logger="distconv.sync.ps")
    settings = ('            "features": list(FEATURES),', "")
    build = (', "build": build_id()}', "}")
    endpoint = started(
        shards,
        tmp_path,
        "async",
        distconv__sync__ps__server=settings,
        distconv__sync__ps__processes=build,
    )
    set_up(endpoint)
    assert warned(caplog) == [
        f"pserver shards run another distconv than this worker ({distconv.build_id()}): "
        f"shard 0 ({endpoint}): no build said (from before shards listed their features: if "
        "older than with_values, the first checkpoint fails); the job goes on, but each runs "
        "its own code: run workers and shards of the same build"
    ]


def test_a_sync_shard_without_abandon_is_sent_none(shards, tmp_path, caplog):
    """A shard of the release before ``abandon`` (not in its features, not an op its wire
    knows) is sent no ``abandon`` when a step of a sync worker raises: it would refuse the op
    as a bad request, in its log, and the worker would drop the error reply. A hello after
    the abandoned step is read after anything the abandon sent."""
    caplog.set_level(logging.WARNING, logger="distconv.pserver")
    features = ('FEATURES = ("with_values", "abandon")', 'FEATURES = ("with_values",)')
    ops = ('    "abandon": ("step",),\n', "")
    endpoint = started(
        shards,
        tmp_path,
        distconv__sync__ps__releases=features,
        distconv__sync__ps__header_fields=ops,
    )
    net = small_net()
    sync = insecure_worker([endpoint])
    try:
        sync.setup(net.parameters())
        sync.start_step(1)
        try:
            raise DataError("rows of the other kind")
        except DataError:
            sync.abandon_step()
        sync.setup(net.parameters())  # the next fit's: the shard answers it after the abandon
    finally:
        sync.close()
    assert "bad request" not in shards.log_text(), shards.log_text()[-3000:]
    assert not [r for r in caplog.records if "ignored a reply" in r.getMessage()]
