"""The shards of one job agree on ``--mode`` and, in async mode, ``--max-staleness``: a worker
whose shards disagree refuses at setup, naming both shards and both values. Shards of other
staleness bounds were not refused: the worker recorded the list, and each shard dropped pushes
by its own bound, so one job ran two schemes."""

from __future__ import annotations

import re

import pytest
from ps_helpers import insecure_worker, shard_argv, small_net

from distconv.sync.base import SyncError


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "settings, said",
    [
        (
            [("async", "0"), ("async", "4")],
            r"disagree on --max-staleness: shard 0 \((?P<a>[^)]+)\) says 0, "
            r"shard 1 \((?P<b>[^)]+)\) says 4",
        ),
        (
            [("async", "4"), ("sync", None)],  # a sync shard takes no --max-staleness
            r"disagree on --mode: shard 0 \((?P<a>[^)]+)\) says async, "
            r"shard 1 \((?P<b>[^)]+)\) says sync",
        ),
    ],
)
def test_shards_of_other_settings_are_refused_at_setup_naming_both(
    shards, tmp_path, settings, said
):
    endpoints = [
        shards.launch(
            shard_argv(["-m", "distconv"], shard=i, shards=2, mode=mode)
            + ["--max-staleness", staleness] * (staleness is not None),
            tmp_path / f"s{i}.log",
        )
        for i, (mode, staleness) in enumerate(settings)
    ]
    sync = insecure_worker(endpoints)
    try:
        with pytest.raises(SyncError, match=said) as refused:
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    named = re.search(said, str(refused.value))
    assert [named["a"], named["b"]] == endpoints, refused.value
