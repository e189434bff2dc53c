"""A shard prunes its own checkpoint parts as the chief prunes its checkpoints: it keeps the
``keep`` newest steps up to the one just written, so a long job does not fill the disk."""

from __future__ import annotations

import signal

import pytest
from ps_helpers import batches, insecure_worker, small_net, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps.client import PServerSync


def _steps(directory) -> list[str]:
    names = sorted(p.name for p in directory.iterdir())
    return [n.removeprefix("pserver-shard0-step").removesuffix(".safetensors") for n in names]


def _worker(endpoint) -> PServerSync:
    return insecure_worker([endpoint], optimizer="adam")


def test_the_chiefs_keep_prunes_the_shards_parts(shards, tmp_path):
    parts = tmp_path / "parts"
    (endpoint,) = shards.start(1, workers=1, extra=["--checkpoint-dir", str(parts)])
    net, sync = small_net(), _worker(endpoint)
    try:
        sync.setup(net.parameters())
        for step, batch in enumerate(batches(5, 4), start=1):
            train_steps(net, sync, [batch])
            sync.save_remote_parts(step * 10, keep=2)
        assert _steps(parts) == ["40", "50"]
        # the job resumed at step 30's checkpoint: 40 and 50 belong to the abandoned attempt
        sync.save_remote_parts(30, keep=2)
        assert _steps(parts) == ["30"]
        sync.save_remote_parts(40, keep=3)
        assert _steps(parts) == ["30", "40"]
        with pytest.raises(SyncError, match="keep 0 < 1"):
            sync.save_remote_parts(50, keep=0)
    finally:
        sync.close()
    shards.procs[-1].send_signal(signal.SIGTERM)
    shards.procs[-1].wait(timeout=20)
    sync = _worker(shards.start(1, workers=1, extra=["--checkpoint-dir", str(parts)])[0])
    try:
        sync.setup(net.parameters())
        sync.save_remote_parts(60, keep=1)  # "last" (written on SIGTERM) is never pruned
    finally:
        sync.close()
    assert _steps(parts) == ["60", "last"]


def test_without_a_keep_the_shard_uses_its_keep_parts_flag(shards, tmp_path):
    parts = tmp_path / "parts"
    extra = ["--checkpoint-dir", str(parts), "--keep-parts", "1"]
    (endpoint,) = shards.start(1, workers=1, extra=extra)
    net, sync = small_net(), _worker(endpoint)
    try:
        sync.setup(net.parameters())
        for step in (1, 2, 3):
            sync.save_remote_parts(step)
            assert _steps(parts) == [str(step)]
    finally:
        sync.close()
