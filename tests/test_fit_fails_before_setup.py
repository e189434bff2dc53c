"""``Trainer.fit`` tells its sync when it fails before the sync's setup (``fail_setup``), so that
the other ranks, waiting in theirs, hear why; in one process nothing changes. The MPI and
parameter-server jobs: ``tests/mpi/test_fit_fails_before_setup.py``,
``tests/sync/ps/test_ps_fit_fails_before_setup.py``."""

from __future__ import annotations

import re

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network
from distconv.notes import notes_of
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer

#: what a fit with resume=True and no output directory raises, before its setup
NO_OUT_DIR = re.escape("resume=True (--resume) needs an output directory")
DATA = {"x": np.ones((8, 4)), "target": np.zeros((8, 1))}


class Telling(LocalSync):
    """A LocalSync recording the errors it is told (``fail_setup``), raising ``fails`` there
    if set, and ``in_setup`` from its setup if set."""

    fails: Exception | None = None
    in_setup: Exception | None = None

    def __init__(self) -> None:
        super().__init__(create_optimizer("sgd", lr=0.01))
        self.told: list[BaseException] = []

    def fail_setup(self, error: BaseException) -> None:
        self.told.append(error)
        if self.fails is not None:
            raise self.fails

    def setup(self, params, config=None, state=None) -> None:
        if self.in_setup is not None:
            raise self.in_setup
        super().setup(params, config, state)


def _trainer(sync: LocalSync) -> Trainer:
    net = Network()
    net.add("out", FullyConnected(4, 1), "x")
    net.add("loss", MSELoss(), ["out", "target"])
    return Trainer(net, sync, 2, progress=False)


def test_a_local_fit_that_fails_before_setup_raises_its_error_unchanged():
    """LocalSync keeps the base's ``fail_setup`` (nothing to tell): the error is the same."""
    with pytest.raises(CheckpointError, match=NO_OUT_DIR) as raised:
        _trainer(LocalSync(create_optimizer("sgd"))).fit(DATA, epochs=1, resume=True)
    assert not notes_of(raised.value)
    assert raised.value.__context__ is None and raised.value.__cause__ is None


def test_the_sync_is_told_the_error_that_fit_raises_before_its_setup():
    sync = Telling()
    with pytest.raises(CheckpointError, match=NO_OUT_DIR) as raised:
        _trainer(sync).fit(DATA, epochs=1, resume=True)
    assert sync.told == [raised.value]


def test_a_failure_to_tell_is_noted_on_the_error_not_raised_instead():
    """A strategy's own ``fail_setup`` that raises must not hide why fit failed."""
    sync = Telling()
    sync.fails = ConnectionError("no shard answers")
    with pytest.raises(CheckpointError, match=NO_OUT_DIR) as raised:
        _trainer(sync).fit(DATA, epochs=1, resume=True)
    told = "telling the other ranks failed too: ConnectionError('no shard answers')"
    assert notes_of(raised.value) == [told]


def test_an_error_of_setup_itself_or_an_interrupt_is_not_told_by_fit():
    """Setup tells the others of its own failure (the transport's job check), and a Ctrl-C
    before it is no error of this rank's job: fit calls ``fail_setup`` for neither."""
    sync = Telling()
    sync.in_setup = ValueError("refused in setup")
    with pytest.raises(ValueError, match="refused in setup"):
        _trainer(sync).fit(DATA, epochs=1)
    trainer = _trainer(Telling())

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    trainer.checkpoints.open = interrupted
    with pytest.raises(KeyboardInterrupt):
        trainer.fit(DATA, epochs=1)
    assert sync.told == [] and trainer.sync.told == []


@pytest.mark.parametrize(
    "data, refused",
    [
        ({**DATA, "x": np.full((8, 4), np.nan)}, "NaN"),  # this rank's data alone, maybe
        ({"x": np.ones((0, 4)), "target": np.zeros((0, 1))}, "the training set is empty"),
    ],
    ids=["not-finite", "empty"],
)
def test_fits_checks_of_this_ranks_data_are_told_too(data, refused):
    """The data are each rank's own (a script may load a shard of them per rank): their
    refusal, before the checkpoints are opened, is told as any error before setup is."""
    sync = Telling()
    with pytest.raises(Exception, match=refused) as raised:
        _trainer(sync).fit(data, epochs=1)
    assert sync.told == [raised.value]
