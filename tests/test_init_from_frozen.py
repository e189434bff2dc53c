"""A script's ``--init-from`` (the Trainer's ``checkpoints`` hook) on several ranks with a frozen
parameter: the chief alone loads the source, and a frozen parameter is no part of the sync, so
the other ranks would keep their own initial values of it and train another model, without a
word (the resume refuses the same case: ``refuse_frozen_resume``). Refused on the chief, naming
the parameters, and the other ranks are told. Two real parameter-server workers (threads) on a
real shard."""

from __future__ import annotations

from functools import partial

import pytest

from distconv.checkpoint import CheckpointError
from distconv.data import load_dataset
from distconv.init import set_seed
from distconv.init_from import InitFromCheckpoints
from distconv.models import lenet
from distconv.refused_starts import init_from_refused_in
from distconv.sync.base import SyncError
from distconv.trainer import Trainer
from tests.sync.ps.ps_helpers import Shards, insecure_worker, run_ranks
from tests.test_init_from import first_run

pytestmark = pytest.mark.timeout(120)


def test_several_ranks_with_a_frozen_parameter_are_refused(tmp_path):
    source = first_run(tmp_path / "a")
    train_set, _ = load_dataset("synthetic", None, 0)
    shards = Shards(tmp_path)
    try:
        endpoints = shards.start(1, workers=2)

        def rank(r: int):
            set_seed(0)
            network = lenet(train_set.image_shape, train_set.num_classes)
            network["conv1"].weight.set_static()
            sync = insecure_worker(endpoints, r, 2, optimizer="adam", lr=0.001)
            trainer = Trainer(
                network, sync, 8, dtype="float64", progress=False,
                out_dir=tmp_path / "b" if r == 0 else None,
                checkpoints=partial(InitFromCheckpoints, source=source),
            )  # fmt: skip
            try:
                with pytest.raises((CheckpointError, SyncError)) as refused:
                    trainer.fit(train_set, epochs=1)
                return str(refused.value)
            finally:
                sync.close()

        chief, other = run_ranks(rank, 2)
    finally:
        shards.stop()
    assert "cannot start 2 ranks from it with frozen parameters ['conv1.weight']" in chief
    said = f"script.py: error: CheckpointError: {chief}"  # the launcher restarts none
    frozen = "the --init-from checkpoint cannot start several ranks with frozen parameters"
    assert init_from_refused_in([said]) == frozen
    assert "rank 0 could not set up" in other, other
