"""Fixtures for the parameter-server tests: real shard processes, a job's key files, an
in-process shard handed its requests one by one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hand_shard import HandShard
from ps_helpers import Shards

from tests.child_env import child_path


@pytest.fixture
def shards(tmp_path):
    s = Shards(tmp_path)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def job_keys(tmp_path_factory) -> str:
    """A key directory for a 2-worker job, made by the real command."""
    directory = tmp_path_factory.mktemp("keys") / "job"
    subprocess.run(
        [sys.executable, "-m", "distconv", "keys", str(directory), "--workers", "2"],
        check=True,
        env={**os.environ, "PYTHONPATH": child_path()},
        capture_output=True,
    )
    return str(directory)


@pytest.fixture
def hand(monkeypatch):
    """Makes :class:`HandShard` s (``hand(small_buffers=False, **ShardConfig fields)``); closes
    them after the test."""
    made: list[HandShard] = []

    def make(small_buffers: bool = False, **config) -> HandShard:
        made.append(HandShard(monkeypatch, small_buffers, **config))
        return made[-1]

    yield make
    for h in made:
        h.close()
