"""A worker whose job's layout is not the shards' (another world size, the shards' addresses
out of order) is refused at its hello in words that name which flag of which side to change:
the shards' ``--workers`` or the worker's ``--world-size``, the worker's ``--pservers`` order.

Real ``distconv train`` workers and real shards on 127.0.0.1."""

from __future__ import annotations

import pytest

from distconv.sync.ps.shard_layout import layout_mismatch
from tests.sync.ps.test_ps_next_job_same_shard import run, train


def _refusal(done) -> str:
    assert done.returncode == 1, done.stderr[-800:]
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.timeout(60)
def test_another_world_size_names_the_shards_workers_and_the_workers_world_size(shards, tmp_path):
    (endpoint,) = shards.start(1, workers=2)
    said = _refusal(run(train(endpoint, tmp_path / "one", world=1)))
    assert f"pserver {endpoint} is set up as" in said and "'workers': 2" in said, said
    assert said.endswith(": restart the shards with --workers 1, or run 2 workers (--world-size 2)")
    assert "--pservers" not in said, said


@pytest.mark.timeout(60)
def test_shards_out_of_order_name_the_pservers_order(shards, tmp_path):
    first, second = shards.start(2, workers=1)
    said = _refusal(run(train(f"{second},{first}", tmp_path / "swapped")))
    assert "give --pservers every shard's address in shard order (2 given" in said, said
    assert "--workers" not in said and "--world-size" not in said, said


@pytest.mark.parametrize("left_out", ["workers", "num_shards"])
def test_a_reply_without_a_layout_setting_names_the_release_not_a_flag(left_out):
    """A shard of another release that leaves a setting out of its reply: 'run None workers
    (--world-size None)' was no way out, nor was restarting the shards with the --workers (or
    the --pservers order) they may already have."""
    expect = {"shard": 0, "num_shards": 1, "workers": 2}
    said = layout_mismatch("h:1", {**expect, left_out: None}, expect)
    assert said.endswith(
        f": its hello reply names no {left_out} (a shard of another distconv release?): start "
        "the shards from the release the workers run"
    ), said
    assert "--workers" not in said and "--pservers" not in said, said
