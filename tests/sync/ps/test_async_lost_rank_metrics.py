"""A rank an asynchronous job lost (``--on-worker-loss continue``) is not measured in the
epoch's record: its rate and its wait in ``examples_per_second_per_rank`` and
``collective_seconds_per_rank`` are null. They read 0.0, and a rank that never waits is what a
straggler looks like there. Real shard; rank 1 a real worker process (``fit_worker.py``),
killed after rank 0's first step; rank 0 a Trainer here."""

from __future__ import annotations

import pytest
from fit_worker import data
from ps_helpers import insecure_worker, small_net
from test_ps_async_fit_end import fit_worker

from distconv.metrics import read_metrics
from distconv.trainer import Trainer

#: a --timeout no test waits out: the shard sees rank 1's process end (on this host)
LONG = 600


@pytest.mark.timeout(60)
def test_a_lost_ranks_rate_and_wait_are_null_in_the_epochs_record(shards, tmp_path):
    extra = ["--timeout", str(LONG), "--on-worker-loss", "continue"]
    endpoints = shards.start(1, workers=2, mode="async", extra=extra)
    victim = fit_worker(endpoints, 1, tmp_path, "0.05")  # slow: still in its first epoch
    sync = insecure_worker(endpoints, 0, 2, lr=0.2, timeout=30)  # as fit_worker.py's
    trainer = Trainer(small_net(seed=0), sync, 4, out_dir=tmp_path / "run", progress=False)
    train_step = trainer.train_step

    def kill_rank_1_after_step_1(*args):
        done = train_step(*args)
        if trainer.pos.step == 1:
            victim.kill()
            victim.wait()
        return done

    trainer.train_step = kill_rank_1_after_step_1
    try:
        assert victim.stdout.readline().strip() == "ready"
        trainer.fit(data(), epochs=1)
    finally:
        sync.close()
        victim.kill()
        victim.communicate()
    assert "going on without" in shards.log_text(), shards.log_text()[-3000:]
    (line,) = read_metrics(tmp_path / "run" / "metrics.jsonl")
    rates, waits = line["examples_per_second_per_rank"], line["collective_seconds_per_rank"]
    assert rates[1] is None and waits[1] is None, line
    assert rates[0] > 0 and 0 < waits[0] < line["seconds"], line
    assert line["collective_seconds"] == waits[0]
