"""LocalSync judges a step whole by which parameters it updated, not by how many.
A parameter frozen (``set_static``) in the middle of a step after it fired was counted
among the updates but no longer among the parameters that train, so the count was one off:

- a step that then updated every other parameter was refused as applied in part ("3 of 2");
- a step that stopped one parameter short matched the count and was handed out whole.

Only a custom loop that freezes inside a step can do this; the Trainer freezes between fits."""

from __future__ import annotations

import re

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(30)


def _first_frozen_after_it_fired(fire_after: str) -> tuple[LocalSync, list[Parameter]]:
    """A sync over a, b, c whose step fired a, froze it, then fired ``fire_after``, and was
    abandoned."""
    params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("abc")]
    sync = LocalSync(create_optimizer("sgd", lr=0.5))
    sync.setup(params)
    sync.start_step(1)
    by_name = {p.name: p for p in params}
    for name in "a" + fire_after:
        p = by_name[name]
        p.grad += 1.0
        p.inc_update(sync)
        if name == "a":
            p.set_static()  # frozen after its update, inside the step
    sync.abandon_step()
    return sync, params


def test_a_step_that_updated_every_parameter_is_whole_though_one_was_frozen_after_firing():
    sync, params = _first_frozen_after_it_fired("bc")
    for i, p in enumerate(params):  # every parameter took the step
        np.testing.assert_array_equal(p.value, np.arange(3.0) + i - 0.5, err_msg=p.name)
    assert set(sync.state_dict()) == {"a", "b", "c"}  # handed out, not refused
    sync.start_step(1)  # and the next step taken
    sync.finish_step()


def test_a_step_one_parameter_short_is_refused_though_one_was_frozen_after_firing():
    sync, params = _first_frozen_after_it_fired("b")
    np.testing.assert_array_equal(params[2].value, np.arange(3.0) + 2)  # c never updated
    refusal = (
        "LocalSync.state_dict() after a step abandoned after updating 2 of 3 parameters: the "
        "parameters and optimizer state hold that step applied in part"
    )
    with pytest.raises(SyncError, match=f"^{re.escape(refusal)}"):
        sync.state_dict()
    with pytest.raises(SyncError, match="start_step"):
        sync.start_step(1)


def test_a_step_is_whole_though_a_parameter_frozen_at_its_start_was_unfrozen_in_it():
    """Its neighbour: c, frozen when the step began, unfrozen after backward passed it (it never
    fires in this step). Counted among the parameters that train now and never updated, it
    made the step applied in part ("2 of 3"), refused until a setup, though every parameter
    that trained in it took it."""
    params = [Parameter(n, np.arange(3.0) + i, static=n == "c") for i, n in enumerate("abc")]
    sync = LocalSync(create_optimizer("sgd", lr=0.5))
    sync.setup(params)
    sync.start_step(1)
    for p in params[:2]:
        p.grad += 1.0
        p.inc_update(sync)
    params[2].set_static(False)
    sync.abandon_step()  # an error after backward, before finish_step
    assert set(sync.state_dict()) == {"a", "b", "c"}  # handed out, not refused
    sync.start_step(1)  # the next step, where c trains
    for p in params:
        p.grad += 1.0
        p.inc_update(sync)
    sync.finish_step()
    np.testing.assert_array_equal(params[2].value, np.arange(3.0) + 2 - 0.5)
