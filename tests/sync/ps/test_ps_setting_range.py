"""A shard's counts that its hello tells the workers fit a 64-bit int, or the shard does not
start: past it, msgpack could not pack the hello's reply, and every worker was answered
``shard error: OverflowError: Integer value out of range``, naming no flag."""

from __future__ import annotations

import pytest
from ps_helpers import run_pserver

from distconv.sync.ps.config import MAX_WORKERS, ShardConfig
from distconv.sync.ps.keys import make_keys

#: a 64-bit int's largest, as msgpack carries it (config.MAX_SETTING)
MAX_SETTING = 2**63 - 1

FLAGS = {
    "--max-staleness": "max_staleness",
    "--max-message-bytes": "max_message_bytes",
    "--max-frame-bytes": "max_frame_bytes",
    "--num-shards": "num_shards",
}


@pytest.mark.parametrize("flag", sorted(FLAGS))
def test_a_count_past_64_bits_is_refused_naming_its_flag(flag):
    config = ShardConfig(bind="127.0.0.1:0", insecure=True, **{FLAGS[flag]: 10**20})
    with pytest.raises(ValueError, match=f"^{flag} must be at most {MAX_SETTING} "):
        config.check()


def test_the_largest_counts_are_told_in_hello(hand):
    """At the bound itself the shard starts and answers a hello with its settings."""
    h = hand(max_staleness=MAX_SETTING, max_message_bytes=MAX_SETTING, max_frame_bytes=MAX_SETTING)
    reply, _ = h.ask({"op": "hello", "host": "h", "digest": "0123456789abcdef"})
    assert reply["op"] == "ok", reply
    assert reply["max_staleness"] == reply["max_message_bytes"] == MAX_SETTING


def test_the_pserver_command_names_the_flag_in_one_line():
    """``--max-staleness 10**20`` (never drop, meant): one line and exit 1, not a shard that
    starts and fails every hello."""
    proc = run_pserver(
        "--insecure", "--workers", "1", "--mode", "async", "--max-staleness", str(10**20)
    )
    assert proc.returncode == 1, proc
    assert proc.stderr.strip() == (
        f"distconv pserver: error: --max-staleness must be at most {MAX_SETTING} (2**63 - 1), "
        f"got {10**20}"
    )


@pytest.mark.timeout(60)
def test_a_worker_count_past_the_bound_is_refused_in_one_line():
    """``--workers 100000000`` (a slip of the finger): the shard started and built a set of
    every declared rank ten times a second, 3.5 GB and a core, for ever."""
    proc = run_pserver("--insecure", "--workers", "100000000", timeout=30)
    assert proc.returncode == 1, proc
    assert proc.stderr.strip() == (
        f"distconv pserver: error: --workers must be 1..{MAX_WORKERS}, got 100000000"
    )
    ShardConfig(bind="127.0.0.1:0", insecure=True, workers=MAX_WORKERS).check()  # the bound
    with pytest.raises(ValueError, match=f"^--workers must be 1..{MAX_WORKERS}, got {10**20}$"):
        ShardConfig(bind="127.0.0.1:0", insecure=True, workers=10**20).check()


def test_keys_for_more_workers_than_a_shard_serves_are_refused_before_any_file(tmp_path):
    """``distconv keys DIR --workers 100000000`` wrote key files until the disk filled."""
    with pytest.raises(ValueError, match=f"^--workers must be 1..{MAX_WORKERS}, got {10**8}$"):
        make_keys(tmp_path / "keys", 10**8)
    assert not (tmp_path / "keys").exists()
