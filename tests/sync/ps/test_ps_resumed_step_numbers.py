"""After a resume, the parameter server's step numbers are the run's: a worker numbered its
pushes from 1 at each process start, so a run resumed at step 4 said "no answer to step 2" at
its step 6, and a shard's part of checkpoint 8 recorded ``completed`` 4 beside its ``step`` 8.
The Trainer hands the position through the contract (``SyncStrategy.start_at``).

Real shard processes on 127.0.0.1, the Trainer in this process; the shards stay up across the
worker's restart, as a job's do when only its workers restart."""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest
from ps_helpers import insecure_worker, small_net
from safetensors import safe_open

from distconv.sync.base import SyncError
from distconv.trainer import Trainer
from tests.sequence_tagger import GLOBAL, tagged_set, tagger
from tests.signals import signal_at

RNG = np.random.default_rng(3)
#: 16 examples in batches of 4: four steps an epoch
DATA = {"image": RNG.standard_normal((16, 1, 8, 8)), "label": RNG.integers(0, 4, 16)}


def _fit(endpoints, out, epochs: int, timeout: float = 20, stop_shard=None) -> None:
    """Fit to ``epochs`` on the shards, resuming what ``out`` holds; ``stop_shard``: (step,
    pid) of a shard to SIGSTOP right after that step of the run."""
    sync = insecure_worker(endpoints, timeout=timeout)
    trainer = Trainer(small_net(), sync, 4, out_dir=out, progress=False)
    if stop_shard is not None:
        signal_at(trainer, stop_shard[0], signal.SIGSTOP, pid=stop_shard[1])
    try:
        trainer.fit(DATA, epochs=epochs, resume="auto")
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_a_part_written_after_a_resume_records_the_runs_step(shards, tmp_path):
    parts = tmp_path / "parts"
    endpoints = shards.start(1, workers=1, extra=["--checkpoint-dir", str(parts)])
    _fit(endpoints, tmp_path / "run", epochs=1)  # checkpoint of step 4
    _fit(endpoints, tmp_path / "run", epochs=2)  # resumed at 4: steps 5 to 8
    with safe_open(str(parts / "pserver-shard0-step8.safetensors"), "numpy") as part:
        meta = part.metadata()
    completed = json.loads(meta["completed"])
    assert meta["step"] == "8"
    assert completed and set(completed.values()) == {8}, completed  # was 4: the restart's


@pytest.mark.timeout(60)
def test_an_error_after_a_resume_names_the_runs_step(shards, tmp_path):
    (endpoint,) = shards.start(1, workers=1)
    _fit([endpoint], tmp_path / "run", epochs=1)  # checkpoint of step 4
    shard = shards.procs[0].pid
    try:
        with pytest.raises(SyncError) as caught:  # resumed at 4; the shard stops after 5
            _fit([endpoint], tmp_path / "run", epochs=2, timeout=1.5, stop_shard=(5, shard))
    finally:
        shards.procs[0].send_signal(signal.SIGCONT)  # else its stop() waits out a kill
    assert "no answer to step 6 from pserver shard(s) 0" in str(caught.value), caught.value


@pytest.mark.timeout(60)
def test_a_step_skipped_for_holding_no_token_still_counts_in_the_push_numbers(shards, tmp_path):
    """A sequence set's step of empty sentences only is skipped by every rank (no start_step)
    but counted by the run: the pushes after it were a step behind, so the part of checkpoint 4
    recorded ``completed`` 3, and an error after it named the step before the run's."""
    parts = tmp_path / "parts"
    endpoints = shards.start(1, workers=1, extra=["--checkpoint-dir", str(parts)])
    sync = insecure_worker(endpoints, optimizer="adam")
    trainer = Trainer(tagger(), sync, GLOBAL, out_dir=tmp_path / "run", progress=False)
    try:  # epoch 0: steps 1 to 4, step 2 of no token at all (tests.sequence_tagger)
        trainer.fit(tagged_set(), epochs=1)
    finally:
        sync.close()
    with safe_open(str(parts / "pserver-shard0-step4.safetensors"), "numpy") as part:
        meta = part.metadata()
    assert meta["step"] == "4"
    assert set(json.loads(meta["completed"]).values()) == {4}, meta["completed"]
