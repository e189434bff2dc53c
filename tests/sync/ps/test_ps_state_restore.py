"""Restoring optimizer state into PServerSync: a stateful optimizer needs every entry to hold its
keys, a parameter without an entry keeps its state as in the other syncs, a stateless optimizer
restores nothing from an empty state. Real shard processes on 127.0.0.1."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import assert_equals_local_training, batches, small_net, train_steps
from ps_helpers import small_block_sync as _sync


def test_a_stateful_optimizer_refuses_a_state_whose_entries_lack_its_keys(shards):
    endpoints = shards.start(2, workers=1)
    net, sync = small_net(), _sync(endpoints, optimizer="adam")
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 4))
        names = [p.name for p in net.parameters()]
        state = {name: {} for name in names}  # every entry empty: used to skip the restore
        with pytest.raises(ValueError, match=f"lacks '.*' of parameter {names[0]} "):
            sync.load_state_dict(state)
    finally:
        sync.close()


def test_a_parameter_without_an_entry_keeps_its_state_as_in_the_other_syncs(shards):
    """One frozen when the checkpoint was written has none (this was refused,
    where LocalSync and MPISync keep the state it has); the others are restored."""
    endpoints = shards.start(2, workers=1)
    net, sync = small_net(), _sync(endpoints, optimizer="adam")
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 4))
        state = sync.state_dict()
        missing = net.parameters()[3].name
        saved = state.pop(missing)
        sync.setup(net.parameters())  # a second setup keeps the state, as LocalSync does
        train_steps(net, sync, batches(1, 2))  # so the state moves on from the one saved
        before = sync.state_dict()
        assert np.any(before[missing]["m"] != saved["m"])
        sync.load_state_dict(state)
        now = sync.state_dict()
        for name, buffers in now.items():
            for key, value in buffers.items():
                if name == missing:  # as LocalSync: the entry it lacks keeps its state
                    np.testing.assert_array_equal(value, before[name][key])
                else:
                    np.testing.assert_array_equal(value, state[name][key])
    finally:
        sync.close()


def test_a_stateless_optimizer_restores_nothing_from_an_empty_state(shards):
    endpoints = shards.start(1, workers=1)
    data = batches(2, 4)
    net, sync = small_net(), _sync(endpoints)
    try:
        sync.setup(net.parameters())
        sync.load_state_dict({})  # plain SGD keeps no state: nothing to send, nothing to check
        train_steps(net, sync, data)
    finally:
        sync.close()
    assert_equals_local_training(net, data)
