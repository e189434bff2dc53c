"""A rate changed with ``optimizer.set_base_lr`` on a parameter server (real shards on
127.0.0.1, a ``PServerSync`` worker and the Trainer): the shards apply each push at the rate
it carries, so a rate set inside a fit is what its next steps train at, as one process
trains; a checkpoint made after it records the new rate, and a run resumed from it on fresh
shards trains on at that rate where it is set so, and is refused, naming the rate, where not.

Between two fits on the same shards, sync and async, the next fit's hellos carry the new rate:
the shard holds the job at that rate from then on (its checkpoint parts record it), where
every rank's hello of that fit carries it; a rank that did not change it is refused, named."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator

import pytest
from ps_helpers import insecure_worker, run_ranks
from safetensors import safe_open

from distconv.checkpoint_errors import CheckpointError
from distconv.data import DataError
from distconv.equivalence import mismatch, weights
from distconv.optim import create_optimizer
from distconv.sync.errors import JobRefused, SyncError
from distconv.sync.local import LocalSync
from distconv.sync.ps.late_job_check import NOT_FAILED
from distconv.sync.rate_agreement import SAME_NEW_RATE
from tests.lr_changes import (
    DECAY,
    FIRST_FIT_STEPS,
    FIRST_LR,
    NEW_LR,
    fit_twice,
    lenet_trainer,
    lr_data,
)

pytestmark = pytest.mark.timeout(120)


def worker(shards, mode: str = "sync", num_shards: int = 1):
    """One worker of a job of one, on ``num_shards`` fresh shards of ``mode``, at
    :data:`FIRST_LR`."""
    endpoints = shards.start(num_shards, workers=1, mode=mode)
    return insecure_worker(endpoints, optimizer="momentum", lr=FIRST_LR)


def part_rate(parts, step: int) -> float:
    """The optimizer rate shard 0's checkpoint part of ``step`` records."""
    with safe_open(str(parts / f"pserver-shard0-step{step}.safetensors"), "numpy") as part:
        return json.loads(part.metadata()["optimizer"])["lr"]


def local(sets: str):
    """The one-process reference of :func:`fit_twice`."""
    return weights(fit_twice(LocalSync(create_optimizer("momentum", lr=FIRST_LR)), sets).network)


def test_a_rate_set_inside_a_fit_is_what_the_shards_apply(shards):
    sync = worker(shards)
    try:
        trained = weights(fit_twice(sync, "in_fit").network)
    finally:
        sync.close()
    assert sync.optimizer.lr == NEW_LR * DECAY
    assert mismatch(local("in_fit"), local("no")) is not None
    assert (wrong := mismatch(local("in_fit"), trained)) is None, wrong


@pytest.mark.parametrize(("mode", "num_shards"), [("sync", 1), ("async", 1), ("sync", 2)])
def test_a_rate_set_between_fits_is_what_the_shards_apply(shards, mode, num_shards):
    sync = worker(shards, mode, num_shards)
    try:
        trained = weights(fit_twice(sync, "between").network)
    finally:
        sync.close()
    assert sync.optimizer.lr == NEW_LR * DECAY
    assert (wrong := mismatch(local("between"), trained)) is None, wrong


def test_the_shards_parts_record_the_rate_set_between_fits(shards, tmp_path):
    """A fit of one epoch, checkpointed (the shard writes its part), the rate set, the next
    epoch resumed from the checkpoint on disk in the same Trainer: its part records the new
    rate, as the chief's checkpoint does."""
    parts = tmp_path / "parts"
    endpoints = shards.start(1, workers=1, extra=["--checkpoint-dir", str(parts)])
    sync = insecure_worker(endpoints, optimizer="momentum", lr=FIRST_LR)
    try:
        trainer = lenet_trainer(sync, tmp_path / "run")
        trainer.fit(lr_data(), epochs=1)
        sync.optimizer.set_base_lr(NEW_LR)
        trainer.fit(lr_data(), epochs=2, resume=True)
    finally:
        sync.close()
    rates = {step: part_rate(parts, step) for step in (FIRST_FIT_STEPS, 2 * FIRST_FIT_STEPS)}
    assert rates == {FIRST_FIT_STEPS: FIRST_LR, 2 * FIRST_FIT_STEPS: NEW_LR}


def test_a_rate_set_between_fits_on_every_rank_trains_as_one_process(shards):
    """Two ranks on two shards, each setting the rate between the fits: each shard takes the
    next fit's job at it from the first hello, and the second's, carrying the same, too.
    The models are built here, one after the other: built in the ranks' threads, they drew
    their initial weights from the one seeded generator at once, and rank 0's were not the
    reference's."""
    endpoints = shards.start(2, workers=2)
    syncs = [insecure_worker(endpoints, r, 2, optimizer="momentum", lr=FIRST_LR) for r in (0, 1)]
    trainers = [lenet_trainer(sync) for sync in syncs]

    def rank_fn(rank: int) -> dict:
        try:
            return weights(fit_twice(syncs[rank], "between", trainers[rank]).network)
        finally:
            syncs[rank].close()

    for rank, trained in enumerate(run_ranks(rank_fn, 2)):
        assert (wrong := mismatch(local("between"), trained)) is None, f"rank {rank}: {wrong}"


def second_fits_with_rank_0s_rate(shards) -> list[str]:
    """Two ranks on one shard fit one epoch; rank 0 alone sets a new rate and both fit again:
    whichever rank's hello the shard hears second is refused, the other stops on it too, and
    no step of the second fit is trained. Each rank's refusal, in rank order."""
    endpoints = shards.start(1, workers=2)

    def rank_fn(rank: int) -> str:
        sync = insecure_worker(endpoints, rank, 2, optimizer="momentum", lr=FIRST_LR)
        try:
            trainer = lenet_trainer(sync)
            trainer.fit(lr_data(), epochs=1)
            if rank == 0:
                sync.optimizer.set_base_lr(NEW_LR)
            with pytest.raises(SyncError) as refused:
                trainer.fit(lr_data(), epochs=2, resume=True)
            assert trainer.pos.step == FIRST_FIT_STEPS
            return str(refused.value)
        finally:
            sync.close()

    return run_ranks(rank_fn, 2)


def test_a_rate_set_between_fits_on_one_rank_alone_is_refused_naming_it(shards):
    """The rate set on rank 0 alone: the refusal names both ranks, the rate and the way out."""
    said = second_fits_with_rank_0s_rate(shards)
    assert all("run different jobs: optimizer.lr: " in s for s in said), said
    setups = [s for s in said if "of the same setup): " in s]
    assert setups and all(SAME_NEW_RATE in s for s in setups), said


def test_a_rank_that_trained_the_first_fit_is_not_said_to_have_no_last_step(shards):
    """The shard forgets a rank's steps at each hello it takes, and named the rank whose hello
    of the second fit was taken "last step none", as if it had never trained: the taken rank is
    told the ranks' points of the job, each named by what the shard knows of its steps."""
    said = " | ".join(second_fits_with_rank_0s_rate(shards))
    assert "ranks are at different points of the job" in said, said
    assert "last step none" not in said, said
    assert "no step since its hello)" in said, said  # the taken rank's
    assert f"last step {FIRST_FIT_STEPS})" in said, said  # the refused rank's, of the first fit


def notebook_ranks(shards, timeout: str) -> tuple[list, list]:
    """Two ranks' syncs and Trainers on one shard of ``--timeout`` ``timeout``, at
    :data:`FIRST_LR`, as two notebook kernels hold them: they live on after a failed fit. The
    models are built here, one after the other (see above)."""
    endpoints = shards.start(1, workers=2, extra=["--timeout", timeout])
    syncs = [insecure_worker(endpoints, r, 2, optimizer="momentum", lr=FIRST_LR) for r in (0, 1)]
    return syncs, [lenet_trainer(sync) for sync in syncs]


def refused_fit(trainer) -> str:
    """``trainer``'s next fit (one epoch more), refused as another job: its words."""
    with pytest.raises(JobRefused) as refused:
        trainer.fit(lr_data(), epochs=2, resume=True)
    assert trainer.pos.step == FIRST_FIT_STEPS
    return str(refused.value)


def test_the_rank_left_waiting_by_a_refused_rank_that_lives_on_is_told_the_refusal(shards):
    """As above, but each rank's worker lives on after the failed fit (a notebook's kernel:
    no close, no bye): the rank whose hello was taken waits in the job check for the refused
    one, and is told the refusal at the shard's --timeout, not after ten rounds that a rank is
    late. Nothing failed: once the rate is set on rank 1 too, both fit again on the same
    shards and train as one process does."""
    syncs, trainers = notebook_ranks(shards, "0.5")

    def rank_fn(rank: int) -> str:
        trainers[rank].fit(lr_data(), epochs=1)
        if rank == 0:
            syncs[rank].optimizer.set_base_lr(NEW_LR)
        return refused_fit(trainers[rank])

    def fit_again(rank: int) -> dict:
        trainers[rank].fit(lr_data(), epochs=2, resume=True)
        return weights(trainers[rank].network)

    try:
        said = run_ranks(rank_fn, 2)
        syncs[1].optimizer.set_base_lr(NEW_LR)
        trained = run_ranks(fit_again, 2)
    finally:
        for sync in syncs:
            sync.close()
    assert all("run different jobs: optimizer.lr: " in s and SAME_NEW_RATE in s for s in said)
    assert not any(NOT_FAILED in s for s in said), said
    for rank, weights_of in enumerate(trained):
        assert (wrong := mismatch(local("between"), weights_of)) is None, f"rank {rank}: {wrong}"


@contextlib.contextmanager
def logged(words: str) -> Iterator[threading.Event]:
    """An event set once a worker's ``distconv.pserver`` logger says a line holding
    ``words``, inside the ``with``."""
    seen = threading.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if words in record.getMessage():
                seen.set()

    logger, handler = logging.getLogger("distconv.pserver"), Seen(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def test_a_rank_late_to_a_fit_at_a_new_rate_is_judged_by_that_fit(shards):
    """Rank 0 sets the new rate and fits; rank 1 comes late, so rank 0 says hello again
    (a late rank's round) before rank 1's hello, at the old rate, comes: refused, naming rank 0
    of the same setup, and rank 0 is told so. The next fit, both at the new rate, rank 1's
    hello first, is taken, and trains as one process does. (Counting hellos, rank 0's second
    hid its first: rank 1's old rate was taken, and its next fit's refused.)"""
    syncs, trainers = notebook_ranks(shards, "1")
    both_told = threading.Barrier(2, timeout=30)

    def rank_fn(rank: int) -> tuple[str, dict]:
        trainers[rank].fit(lr_data(), epochs=1)
        if rank == 0:
            syncs[rank].optimizer.set_base_lr(NEW_LR)
        if rank == 1:  # after rank 0's first round (the shard's --timeout): its second hello
            assert said_again.wait(30), "rank 0 never said hello again"
        said = refused_fit(trainers[rank])
        both_told.wait()  # (a fit again within rank 0's round would have joined its setup)
        syncs[rank].optimizer.set_base_lr(NEW_LR)
        time.sleep(0.5 * (1 - rank))  # rank 1's hello first
        trainers[rank].fit(lr_data(), epochs=2, resume=True)
        return said, weights(trainers[rank].network)

    try:
        with logged("rank 0: ranks late to the job check, saying hello again") as said_again:
            (waited, _), (refused, trained) = run_ranks(rank_fn, 2)
    finally:
        for sync in syncs:
            sync.close()
    words = (
        f"rank 1 and rank 0 run different jobs: optimizer.lr: {FIRST_LR} here, {NEW_LR} there "
        "(here: rank 1's hello; there: rank 0's, of the same setup)"
    )
    assert words in refused and words in waited, (refused, waited)
    assert (wrong := mismatch(local("between"), trained)) is None, wrong


def test_a_fit_that_failed_before_its_setup_keeps_its_ranks_setups_in_step(shards):
    """Rank 1's second fit fails before its setup (handed no data): it tells the others, its
    failure note's hello a setup of its own, and rank 0's fit is refused naming it. The third,
    both at the new rate, rank 1's hello first, is taken, and trains as one process does.
    (Numbered by setup() alone, rank 1's note and third hello were a setup behind rank 0's:
    its new rate was refused, quoting rank 0's of the second fit.)"""
    syncs, trainers = notebook_ranks(shards, "5")
    both_told = threading.Barrier(2, timeout=30)

    def rank_fn(rank: int) -> tuple[str, dict]:
        trainers[rank].fit(lr_data(), epochs=1)
        with pytest.raises((DataError, JobRefused)) as failed:
            trainers[rank].fit(lr_data() if rank == 0 else {}, epochs=2, resume=True)
        both_told.wait()
        syncs[rank].optimizer.set_base_lr(NEW_LR)
        time.sleep(0.5 * (1 - rank))  # rank 1's hello first
        trainers[rank].fit(lr_data(), epochs=2, resume=True)
        return str(failed.value), weights(trainers[rank].network)

    try:
        (told, _), (_, trained) = run_ranks(rank_fn, 2)
    finally:
        for sync in syncs:
            sync.close()
    assert "rank 1 could not set up" in told, told
    assert (wrong := mismatch(local("between"), trained)) is None, wrong


def test_a_checkpoint_after_the_change_resumes_at_the_new_rate(shards, tmp_path):
    """Three epochs in one fit, the rate set before the second epoch's second step,
    checkpoints at each epoch's end; the second epoch's is the newest once the third's is
    moved away: the third epoch resumed from it trains as the run that went on did."""
    out = tmp_path / "run"
    sync = worker(shards)
    try:
        run = lenet_trainer(sync, out)
        run.set_at = FIRST_FIT_STEPS + 1
        run.fit(lr_data(), epochs=3)
        going_on = weights(run.network)
    finally:
        sync.close()
    (out / "checkpoints" / f"step-{3 * FIRST_FIT_STEPS:08d}").rename(tmp_path / "third")

    sync = worker(shards)  # fresh shards: the checkpoint's optimizer state from the chief
    try:
        with pytest.raises(CheckpointError, match=rf"optimizer.lr: checkpoint {NEW_LR}, "):
            lenet_trainer(sync, out).fit(lr_data(), epochs=3, resume=True)
        sync.optimizer.set_base_lr(NEW_LR)
        resumed = lenet_trainer(sync, out)
        resumed.fit(lr_data(), epochs=3, resume=True)
    finally:
        sync.close()
    assert resumed.pos.step == 3 * FIRST_FIT_STEPS
    assert (wrong := mismatch(going_on, weights(resumed.network))) is None, wrong
