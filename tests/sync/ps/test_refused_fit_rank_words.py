"""A second fit refused on real shards names each rank by what the shard knows of its steps:
the rank whose hello was taken had trained the first fit, but the shard forgets a rank's steps
at each hello it takes, and named that rank "last step none", as if it had never trained."""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker, run_ranks

from distconv.sync.errors import SyncError
from tests.lr_changes import FIRST_FIT_STEPS, FIRST_LR, NEW_LR, data, lenet_trainer

pytestmark = pytest.mark.timeout(120)


def test_a_rank_that_trained_the_first_fit_is_not_said_to_have_no_last_step(shards):
    """Both ranks fit one epoch, rank 0 alone sets a new rate, both fit again: one rank's
    hello is taken, the other's refused (whichever the shard hears second), and the taken one
    is told the ranks' points of the job."""
    endpoints = shards.start(1, workers=2)

    def rank_fn(rank: int) -> str:
        sync = insecure_worker(endpoints, rank, 2, optimizer="momentum", lr=FIRST_LR)
        try:
            trainer = lenet_trainer(sync)
            trainer.fit(data(), epochs=1)
            if rank == 0:
                sync.optimizer.set_base_lr(NEW_LR)
            with pytest.raises(SyncError) as refused:
                trainer.fit(data(), epochs=2, resume=True)
            return str(refused.value)
        finally:
            sync.close()

    said = " | ".join(run_ranks(rank_fn, 2))
    assert "ranks are at different points of the job" in said, said
    assert "last step none" not in said, said
    assert "no step since its hello)" in said, said  # the taken rank's
    assert f"last step {FIRST_FIT_STEPS})" in said, said  # the refused rank's, of the first fit
