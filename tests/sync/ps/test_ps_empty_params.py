"""A parameter of no elements (a layer of width 0, a table of no rows) has no blocks: the shards
hold nothing of it and the worker pushes nothing of it, as a single process updates nothing of
it; the other parameters train as without it."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, small_net

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.ps.blocks import Layout, ParamSpec
from distconv.sync.ps.client import PServerSync

EMPTY = [((0,), False), ((4, 0), False), ((0, 4), True)]  # (shape, sparse_rows)


def test_a_parameter_of_no_elements_has_no_blocks():
    specs = [
        ParamSpec("a", (3,), "float64"),
        ParamSpec("e", (4, 0), "float64"),
        ParamSpec("t", (0, 4), "float64", sparse=True),
        ParamSpec("b", (2,), "float64"),
    ]
    layout = Layout(specs, num_shards=2, block_bytes=8)
    assert layout.blocks_of(1) == [] and layout.blocks_of(2) == []
    assert [b.param for b in layout.blocks] == [0, 0, 0, 3, 3]  # ids still count up in order


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shape,sparse", EMPTY)
def test_a_model_with_a_parameter_of_no_elements_trains_through_the_shards(shards, shape, sparse):
    def params():
        empty = Parameter("e", np.zeros(shape), sparse_rows=sparse)
        return [empty, Parameter("w", np.arange(3.0))]

    ref, mine = params(), params()
    local = LocalSync(create_optimizer("momentum", lr=0.1))
    local.setup(ref)
    sync = PServerSync(
        create_optimizer("momentum", lr=0.1),
        rank=0,
        world_size=1,
        pservers=shards.start(1, workers=1),
        insecure=True,
        timeout=20,
    )
    try:
        sync.setup(mine)  # was refused by the shard: "seed: block 0 rows 0:0 outside 0:0"
        for strategy, ps in ((local, ref), (sync, mine)):
            for g in (1.0, -0.5):
                strategy.start_step(1)
                for p in ps:
                    p.grad[...] = g
                    p.inc_update(strategy.on_gradient)
                strategy.finish_step()
        np.testing.assert_array_equal(mine[1].value, ref[1].value)
        state = sync.state_dict()
        assert state["e"]["velocity"].shape == shape
        sync.load_state_dict(state)
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_more_shards_than_blocks_is_refused_before_the_hello_naming_the_idle_ones(shards):
    """A small model on many shards left some without a block, and setup failed with the
    shard's 'seed: no blocks', which says neither which shards nor what to do."""
    endpoints = shards.start(10, workers=1)
    sync = insecure_worker(endpoints, block_bytes=1 << 20)  # one block a parameter: 8
    try:
        with pytest.raises(SyncError) as info:
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    assert str(info.value) == (
        f"rank 0: the model's 8 blocks leave 2 of the 10 pservers without one "
        f"({', '.join(endpoints[8:])}), and a pserver holds at least one: run at most 8 shards"
    )
