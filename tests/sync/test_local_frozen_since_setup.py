"""LocalSync refuses the state of a step abandoned after some, not all, of its updates.
A parameter frozen since setup never fires again, so a step that updated every other
parameter is whole: it must not be refused as applied in part.

The custom loop the Network's own error asks for: freeze conv1 after setup, and the next
backward updates every other parameter, then raises (the firing order changed);
``reset_firing_order()`` is what it says to call, and training goes on from that whole step."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.network import NetworkError
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from tests.mpi.common import global_batches, one_step, small_lenet

pytestmark = pytest.mark.timeout(60)


def test_a_step_that_updated_every_unfrozen_parameter_is_not_refused():
    net = small_lenet(seed=3)
    sync = LocalSync(create_optimizer("adam", lr=0.01))
    sync.setup([p for p in net.parameters() if not p.static])
    (x, y), *rest = list(global_batches())
    one_step(net, sync, x, y)  # records the firing order
    frozen = [p for p in net.parameters() if p.name.startswith("conv1.")]
    for p in frozen:
        p.set_static()
    before = {p.name: p.value.copy() for p in net.parameters()}
    with pytest.raises(NetworkError, match="reset_firing_order"):
        one_step(net, sync, x, y)  # every unfrozen parameter updated, then the order check
    sync.abandon_step()
    for p in net.parameters():  # the step was whole: every parameter that trains moved
        assert np.array_equal(p.value, before[p.name]) == (p in frozen), p.name
    assert set(sync.state_dict()) == set(before)  # handed out, not refused
    net.reset_firing_order()
    for x, y in rest:
        one_step(net, sync, x, y)
    assert all(np.array_equal(p.value, before[p.name]) for p in frozen)
