"""A parameter-server run resumed under another mode than its checkpoint's: the worker learns
its shards' mode and staleness at setup, after the checkpoint is restored, so the resume compares
the checkpoint's scheme with the shards' there. A resume under the shards' own scheme says
nothing; one under sync-mode shards says both, and the epoch's line keeps the async steps'
scheme and their push counts."""

from __future__ import annotations

import logging
import signal

import numpy as np
import pytest
from ps_helpers import insecure_worker, small_net

from distconv.metrics import read_metrics, summary
from distconv.resume import Preempted
from distconv.scheme_history import UNRECORDED, checkpoint_schemes
from distconv.trainer import Trainer
from tests.signals import signal_at

RNG = np.random.default_rng(3)
#: 16 examples in batches of 4: four steps an epoch
DATA = {"image": RNG.standard_normal((16, 1, 8, 8)), "label": RNG.integers(0, 4, 16)}


def _fit(shards, out, caplog, mode: str, epochs: int, stop: int | None = None) -> str:
    """Fit ``epochs`` into ``out`` on a fresh shard in ``mode`` (async: staleness 0), resuming
    what is there, up to a SIGTERM after step ``stop``: what the resume warned and the
    Trainer's epoch lines said."""
    extra = ["--max-staleness", "0"] if mode == "async" else []
    sync = insecure_worker(shards.start(1, workers=1, mode=mode, extra=extra))
    trainer = Trainer(small_net(), sync, 4, out_dir=out, progress=False)
    caplog.clear()
    try:
        with (
            caplog.at_level(logging.WARNING, logger="distconv.resume"),
            caplog.at_level(logging.INFO, logger="distconv.trainer"),
        ):
            if stop is None:
                trainer.fit(DATA, epochs=epochs, resume="auto")
            else:
                signal_at(trainer, stop, signal.SIGTERM)
                with pytest.raises(Preempted):
                    trainer.fit(DATA, epochs=epochs, resume="auto")
    finally:
        sync.close()
    return caplog.text


@pytest.mark.timeout(60)
def test_a_resume_under_sync_shards_of_an_async_checkpoint_says_both(shards, tmp_path, caplog):
    out = tmp_path / "run"

    def fit(mode: str, stop: int | None = None) -> str:
        return _fit(shards, out, caplog, mode, 1, stop)

    async_ = {"sync": "pserver", "mode": "async", "max_staleness": 0}
    fit("async", stop=1)
    assert "sync scheme" not in fit("async", stop=2)  # the same, once the shards said it
    said = fit("sync")
    assert "resuming after step 2 under another sync scheme" in said, said
    assert '"mode": "async", "max_staleness": 0} then' in said
    assert '{"sync": "pserver", "mode": "sync"} now' in said
    (line,) = read_metrics(out / "metrics.jsonl")
    assert line["scheme"] == {"sync": "pserver", "mode": "sync"}
    assert line["earlier_schemes"] == [{"scheme": async_, "to_step": 2}]
    # the two async steps' pushes, which the checkpoint carried, are the epoch's (one a step)
    assert (line["push_messages_applied"], line["push_messages_dropped"]) == (2, 0), line
    assert "pushes 2 applied, 0 dropped (its async steps, to step 2)" in said, said


def _resumed_record(earlier: list, scheme: dict) -> dict:
    """The chief's record of a 4-step epoch (steps 5 to 8) resumed in its middle, as
    :class:`~distconv.epoch_tally.EpochTally` makes it: ``scheme`` its last steps', ``earlier``
    its earlier steps' (:data:`~distconv.scheme_history.EARLIER`), the push counts carried."""
    return {
        "epoch": 2, "step": 8, "train_loss": 1.0, "seconds": 0.1, "examples_per_second": 160.0,
        "push_messages_applied": 2, "push_messages_dropped": 0, "global_batch": 4,
        "world_size": 1, "scheme": scheme, "earlier_schemes": earlier,
    }  # fmt: skip


def test_an_epoch_whose_earlier_steps_ran_under_an_unrecorded_scheme_has_its_log_line():
    """An older distconv's checkpoint (no scheme) resumed in its epoch's middle under async,
    checkpointed, then resumed under sync: the line's earlier schemes begin with an unrecorded
    one (JSON null), which the log line read as a scheme and raised on, after the epoch's
    metrics and checkpoint were written, ending the chief with a traceback."""
    async_ = {"sync": "pserver", "mode": "async", "max_staleness": 0}
    earlier = [*checkpoint_schemes({}, 5), {"scheme": async_, "to_step": 6}]
    assert earlier[0]["scheme"] is UNRECORDED
    record = _resumed_record(earlier, {"sync": "pserver", "mode": "sync"})
    said = summary(record, 2)
    assert said.endswith("pushes 2 applied, 0 dropped (its async steps, step 6)"), said


@pytest.mark.timeout(60)
def test_an_epoch_begun_under_sync_and_resumed_under_async_says_its_pushes_are_its_last_steps(
    shards, tmp_path, caplog
):
    """The other way round: a sync epoch stopped after step 2 and resumed under async counts
    the pushes of its last two steps alone, which its line printed as the epoch's, half of its
    updates seemingly lost. The epoch after, async from its start, says nothing of it."""
    out = tmp_path / "run"

    def fit(mode: str, stop: int | None = None) -> str:
        return _fit(shards, out, caplog, mode, 2, stop)

    fit("sync", stop=2)
    said = fit("async")
    first, second = read_metrics(out / "metrics.jsonl")
    assert first["earlier_schemes"] == [
        {"scheme": {"sync": "pserver", "mode": "sync"}, "to_step": 2}
    ]
    assert (first["push_messages_applied"], second["push_messages_applied"]) == (2, 4)
    assert "pushes 2 applied, 0 dropped (its async steps, after step 2)" in said, said
    assert "pushes 4 applied, 0 dropped\n" in said, said  # a pure async epoch: no steps named


ASYNC = {"sync": "pserver", "mode": "async", "max_staleness": 0}
SYNC = {"sync": "pserver", "mode": "sync"}
MPI = {"sync": "mpi", "algorithm": "allreduce"}


@pytest.mark.parametrize(
    ("earlier", "now", "named"),
    [
        ([(ASYNC, 6)], SYNC, " (its async steps, to step 6)"),
        ([(ASYNC, 6)], MPI, " (its async steps, to step 6)"),
        ([(SYNC, 6)], ASYNC, " (its async steps, after step 6)"),
        ([(MPI, 6)], ASYNC, " (its async steps, after step 6)"),
        ([(ASYNC, 5), (SYNC, 6)], ASYNC, " (its async steps, to step 5 and after step 6)"),
        ([(SYNC, 5), (ASYNC, 7)], SYNC, " (its async steps, steps 6 to 7)"),
        ([(SYNC, 5), (ASYNC, 6)], SYNC, " (its async steps, step 6)"),
        ([({**ASYNC, "max_staleness": 2}, 6)], ASYNC, ""),  # every step async: all counted
    ],
    ids=[
        "async-sync",
        "async-mpi",
        "sync-async",
        "mpi-async",
        "async-sync-async",
        "sync-async-sync",
        "sync-async-sync-one",
        "async-async",
    ],
)
def test_a_resumed_epochs_log_line_names_the_steps_its_pushes_count(earlier, now, named):
    earlier = [{"scheme": scheme, "to_step": step} for scheme, step in earlier]
    said = summary(_resumed_record(earlier, now), 2)
    assert said.endswith(f"pushes 2 applied, 0 dropped{named}"), said


def test_an_async_epoch_not_resumed_under_another_scheme_names_no_steps():
    """A pure async run's later epochs (no ``scheme`` key) and its first (its scheme, no
    earlier ones)."""
    record = _resumed_record([], ASYNC)
    del record["earlier_schemes"]
    assert summary(record, 2).endswith("pushes 2 applied, 0 dropped")
    del record["scheme"]
    assert summary(record, 2).endswith("pushes 2 applied, 0 dropped")
