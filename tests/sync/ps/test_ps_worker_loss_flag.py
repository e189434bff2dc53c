"""``--on-worker-loss continue`` is async mode's: a sync shard refuses it at start, naming why.
It was taken and ignored: a sync step waits for every worker's push, so the first worker lost
failed the job, as ``fail`` does, where the flag said the job would go on."""

from __future__ import annotations

import pytest
from ps_helpers import run_pserver

from distconv.sync.ps.config import ShardConfig

SAID = (
    "--on-worker-loss continue needs --mode async: a sync step waits for every worker's push, "
    "so losing one fails the job whatever this flag says"
)


def test_a_sync_shard_refuses_continue():
    config = ShardConfig(bind="127.0.0.1:0", insecure=True, mode="sync", on_worker_loss="continue")
    with pytest.raises(ValueError) as refused:
        config.check()
    assert str(refused.value) == SAID


@pytest.mark.parametrize(("mode", "loss"), [("async", "continue"), ("sync", "fail")])
def test_the_combinations_that_mean_what_they_say_start(mode, loss):
    ShardConfig(bind="127.0.0.1:0", insecure=True, mode=mode, on_worker_loss=loss).check()


def test_the_pserver_command_says_so_in_one_line():
    proc = run_pserver("--insecure", "--workers", "2", "--on-worker-loss", "continue")
    assert proc.returncode == 1, proc
    assert proc.stderr.strip() == f"distconv pserver: error: {SAID}"
