"""A worker whose wait (1.5 x ``timeout=``) is no longer than its shards' ``--timeout``: a
rank that never comes was reported as the healthy shard's silence ("no answer to
all_equal:1 from pserver shard(s) 0 within 0.75 s"), and the cause (rank 1 never came)
reached only the shard's log. Setup now warns once, naming both numbers and the ways out,
and the wait that gives up says what the shard is likelier waiting for. Real shard process,
real sockets; rank 1 never starts."""

from __future__ import annotations

import logging
import os
import signal

import pytest
from ps_helpers import (
    assert_missing_rank_named_unwarned,
    batches,
    insecure_worker,
    shard_argv,
    shorter_wait_warnings,
    small_net,
    train_steps,
)

from distconv.sync.base import SyncError
from distconv.sync.ps.config import MIN_TIMEOUT
from distconv.sync.ps.shard_timeouts import holds_for_workers
from tests.shorter_wait import warned_at_setup_alone

pytestmark = pytest.mark.timeout(60)

SHARD_TIMEOUT = "2"


def test_a_shorter_wait_is_warned_of_once_and_its_timeout_says_the_likelier_cause(shards, caplog):
    (endpoint,) = shards.start(1, 2, extra=["--timeout", SHARD_TIMEOUT])
    sync = insecure_worker([endpoint], rank=0, world=2, timeout=0.5)
    caplog.set_level(logging.WARNING, "distconv.pserver")
    try:
        for _ in range(2):  # a second setup (a fit again) is not warned of again
            with pytest.raises(SyncError) as raised:
                sync.setup(small_net().parameters())
            said = str(raised.value)
            assert "no answer to setup's job check (all_equal:1)" in said, said
            assert "within 0.75 s" in said, said
            assert (
                " (shard(s) 0 wait up to 2 s for every worker, no less than this wait: a worker "
                "that has not come, which the shard's log names, is the likelier cause; "
                "see the warning at setup)"
            ) in said, said
    finally:
        sync.close()
    (warned,) = shorter_wait_warnings(caplog)
    assert warned == (
        "rank 0: this worker waits 0.75 s for a shard's reply (1.5 x timeout=0.5 s), and "
        f"pserver shard(s) 0 ({endpoint}) wait up to 2 s (their --timeout) for every worker: "
        "a worker that does not come would be reported here as a shard that gives no answer, "
        "and named only in the shard's log; pass timeout=2 or more (distconv train: --timeout "
        "2), or start the shards with a --timeout below 0.75"
    ), warned


def test_a_wait_below_the_shards_least_timeout_is_not_told_to_start_them_below_it(shards, caplog):
    """A worker's ``--timeout 0.1`` (a wait of 0.15 s) beside shards at their least, 0.2 s
    (the launcher floors the workers' timeout there): the warning told the user to start the
    shards with a --timeout below 0.15, which a shard refuses, and which the launcher gives
    them no flag for. The way out that works is said alone."""
    (endpoint,) = shards.start(1, 2, extra=["--timeout", repr(MIN_TIMEOUT)])
    (warned,) = warned_at_setup_alone(endpoint, 0.1, caplog)
    assert warned.endswith(
        f"pass timeout={MIN_TIMEOUT:g} or more (distconv train: --timeout {MIN_TIMEOUT:g})"
    ), warned
    assert "below" not in warned, warned


def test_the_way_out_names_the_worker_that_never_came_and_warns_nothing(tmp_path, caplog):
    argv = shard_argv(["-m", "distconv"], workers=2) + ["--timeout", SHARD_TIMEOUT]
    assert_missing_rank_named_unwarned(tmp_path, argv, caplog, timeout=float(SHARD_TIMEOUT))


def test_a_job_of_one_worker_is_warned_of_nothing_and_a_silent_shard_not_blamed_on_one(
    shards, caplog
):
    """A shard of a one-worker job waits for no other worker: its --timeout cannot outlast a
    missing one. Setup warned all the same, and a stopped shard's timeout told the user that
    a worker that never came (there is none) was the likelier cause."""
    (endpoint,) = shards.start(1, 1, extra=["--timeout", SHARD_TIMEOUT])
    net, data = small_net(), batches(2, 8)
    sync = insecure_worker([endpoint], rank=0, world=1, timeout=0.5)
    caplog.set_level(logging.WARNING, "distconv.pserver")
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, data[:1])
        os.kill(shards.procs[0].pid, signal.SIGSTOP)
        try:
            with pytest.raises(SyncError, match="no answer to step 2 from pserver") as raised:
                train_steps(net, sync, data[1:])
        finally:
            os.kill(shards.procs[0].pid, signal.SIGCONT)
    finally:
        sync.close()
    assert "every worker" not in str(raised.value), raised.value
    assert shorter_wait_warnings(caplog) == []


@pytest.mark.parametrize(
    ("what", "mode", "holds"),
    [
        ("all_equal:1", "async", True),
        ("barrier:12", "sync", True),
        ("step 3", "sync", True),
        ("step 3", "async", False),  # an async push is answered at once
        ("pull", "sync", False),
        ("hello", "sync", False),
        ("get_state", "sync", False),
    ],
)
def test_only_the_waits_a_shard_holds_for_every_worker_get_the_hint(what, mode, holds):
    assert holds_for_workers(what, mode) is holds
