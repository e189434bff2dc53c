"""A Trainer whose sync is closed is told the way on: a new sync and a new Trainer on it. The
refusal said "make a new sync to go on", and a new sync alone is none: the Trainer keeps the
one it was made with. Where the call came through ``Trainer.evaluate`` or ``fit``, the words
name that call, not the sync's ``allreduce_sum`` or ``setup`` that it reached."""

from __future__ import annotations

import re

import pytest

from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync import LocalSync, SyncError
from distconv.sync.closed_calls import refuse_closed_trainer
from distconv.trainer import Trainer


def _trained(train):
    """A Trainer that fit one epoch, and its sync, closed."""
    set_seed(0)
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    trainer = Trainer(net, LocalSync(create_optimizer("sgd", lr=0.1)), 16, progress=False)
    trainer.fit(train, epochs=1)
    trainer.sync.close()
    return trainer


def test_the_way_on_it_names_works(small_data):
    """A new sync and a new Trainer on the same network evaluate the weights it trained."""
    train, test = small_data
    trainer = _trained(train)
    weights = [p.value.copy() for p in trainer.params]
    again = Trainer(trainer.network, LocalSync(create_optimizer("sgd", lr=0.1)), 16)
    assert again.evaluate(test)["test_loss"] > 0
    assert all((a == p.value).all() for a, p in zip(weights, again.params))


def test_the_trainers_refusal_names_its_call_and_the_closed_sync():
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    refuse_closed_trainer(sync, "evaluate")  # open: nothing said
    sync.close()
    with pytest.raises(SyncError) as refused:
        refuse_closed_trainer(sync, "evaluate")
    assert str(refused.value) == (
        "Trainer.evaluate() called after its LocalSync was closed: make a new sync and a new "
        "Trainer on it (evaluate and save state before closing)"
    )


@pytest.mark.parametrize("call", ["evaluate", "fit"])
def test_trainer_calls_on_a_closed_sync_name_the_call_and_a_new_trainer(small_data, call):
    """Named as the Trainer's call, not the sync's, and told a new Trainer is needed too."""
    train, test = small_data
    trainer = _trained(train)
    use = {"evaluate": lambda: trainer.evaluate(test), "fit": lambda: trainer.fit(train)}[call]
    with pytest.raises(
        SyncError, match=rf"^Trainer\.{call}\(\) called after its LocalSync was"
    ) as e:
        use()
    assert re.search(r"make a new sync.* and a new Trainer on it", str(e.value)), e.value
