"""A LocalSync of one's own whose overrides call LocalSync's own: its refusals ask about an
override only where skipping it would explain them."""

from __future__ import annotations

import pytest

from distconv.optim import SGD
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from tests.test_researcher_sync import _model


class CountingSetup(LocalSync):
    """Counts its setups, calling LocalSync's own as it should."""

    def setup(self, params, config=None, state=None) -> None:
        super().setup(params, config, state)
        self.setups = getattr(self, "setups", 0) + 1


def test_a_gradient_fired_twice_is_not_blamed_on_a_setup_of_one_s_own():
    """A parameter fired twice in a step (a layer's backward that calls inc_update twice) was
    refused "fired twice ... (CountingSetup overrides setup(): does it call super().setup()?)":
    no setup, skipped or not, makes a gradient arrive twice."""
    net, _ = _model()
    sync = CountingSetup(SGD(lr=0.1))
    sync.setup(net.parameters())
    weight = net["fc"].weight
    sync.start_step(4)
    sync(weight)
    with pytest.raises(SyncError, match="twice") as refused:
        sync(weight)
    assert "overrides" not in str(refused.value)


def test_a_gradient_of_another_model_still_asks_about_the_setup_of_one_s_own():
    """The question stays where a setup that skipped LocalSync's would explain the refusal."""
    net, _ = _model()
    other, _ = _model()
    sync = CountingSetup(SGD(lr=0.1))
    sync.setup(net.parameters())
    sync.start_step(4)
    with pytest.raises(SyncError, match=r"overrides setup\(\): does it call super\(\)\.setup"):
        sync(other["fc"].weight)
