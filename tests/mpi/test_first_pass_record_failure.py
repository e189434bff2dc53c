"""A step whose every update MPISync made, and whose first-step exchange of the firing order
failed after them, holds a whole step: it is not said (nor refused) as one applied in part.

One rank (SingleRankComm), with the exchange made to raise once the step's updates are made,
as a peer gone there (or a third Ctrl-C) does.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.trainer import Trainer
from tests.mpi.common import small_lenet, trainer_data


def test_a_failed_firing_order_exchange_after_every_update_is_no_step_applied_in_part(caplog):
    t = Trainer(
        small_lenet(seed=3),
        MPISync(create_optimizer("adam", lr=0.01), comm=SingleRankComm()),
        8,
        progress=False,
    )
    sync, before = t.sync, {}
    finish = sync.finish_step

    def finish_step() -> None:
        before.update({p.name: p.value.copy() for p in t.params})
        finish()

    def exchange_fails(made: Any = None) -> None:
        raise ConnectionError("the firing order's exchange failed")

    sync.finish_step, sync._record_first_pass = finish_step, exchange_fails
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(ConnectionError):
            t.fit(trainer_data(), epochs=1)
        updated = [p.name for p in t.params if not np.array_equal(p.value, before[p.name])]
        assert len(updated) == len(t.params)  # every update was made: a whole step
        assert sync.applied_in_part is None
        assert "applied in part" not in caplog.text
        assert set(sync.state_dict()) == {p.name for p in t.params}  # not refused
    finally:
        sync.close()
