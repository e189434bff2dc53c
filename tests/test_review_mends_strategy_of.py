"""The strategy behind a callback (:func:`distconv.fired_writes.strategy_of`) is the sync of
its bound ``on_gradient``, the callback the Trainer hands to every backward: the step's hold
on the gradients is that sync's, named after it and let go of at its ``finish_step``. The
write guard, the step hold and the loss-scale warning read one answer; a hold filed on the
bound method's function was shared by every sync of the class, named ``method``, and kept the
gradients read-only past ``finish_step``."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from tests.sync.ps.ps_helpers import small_net

pytestmark = pytest.mark.timeout(60)


def test_a_step_fired_to_the_syncs_bound_on_gradient_is_held_by_that_sync():
    net, sync = small_net(), LocalSync(create_optimizer("sgd", lr=0.1))
    rng = np.random.default_rng(3)
    feeds = {
        "image": Arg(rng.standard_normal((8, 1, 8, 8)), needs_grad=False),
        "label": Arg(ids=rng.integers(0, 4, 8), needs_grad=False),
    }
    with sync:
        sync.setup(net.parameters())
        sync.start_step(8)
        net.forward(feeds)
        net.backward(sync.on_gradient, loss="loss", loss_scale=8)
        first = net.parameters()[0]
        with pytest.raises(SyncError, match=r"fired to LocalSync in a step that is unfinished"):
            first.zero_grad()
        sync.finish_step()
        first.zero_grad()  # the sync's own finish_step let go of its hold
    assert not first.grad.any()
