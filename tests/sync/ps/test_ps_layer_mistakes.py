"""A layer of one's own that breaks the firing rules, trained by two workers through real
shards (``tests/layer_mistakes.py``): each worker stops with the Network's error, naming the
parameter and the layer, where the worker failed in the wire's words or its blocks'."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks

from distconv.network import NetworkError
from tests.layer_mistakes import build, local_run, train, weights


def two_workers(endpoints: list[str], mistake: str | None) -> list[dict[str, np.ndarray]]:
    """Train :func:`build` with ``mistake`` on two workers (SGD, lr 0.1): their weights."""
    nets = [build(mistake) for _ in range(2)]  # here: the initialisers' generator is global

    def rank_fn(rank: int) -> dict[str, np.ndarray]:
        sync = insecure_worker(endpoints, rank, 2, lr=0.1)
        try:
            sync.setup(nets[rank].parameters(), {})
            train(nets[rank], sync, rank, 2)
            return weights(nets[rank])
        finally:
            sync.close()

    return run_ranks(rank_fn, 2)


#: how the Network's refusals of a gradient of another shape or dtype begin
UNLIKE = "gradient of 'ss1.bias', fired in the backward of layer 'ss1', has shape "


@pytest.mark.parametrize(
    ("mistake", "has"),
    [
        ("twice", "'ss1.bias' fired twice in one backward pass"),
        ("rebind_shape", UNLIKE + "(3, 1) and dtype float64"),
        ("rebind16", UNLIKE + "(3,) and dtype float16"),
        ("early", "layer 'ss1' wrote into the gradient of 'ss1.weight' after firing it"),
    ],
)
def test_a_firing_mistake_stops_the_workers_in_the_networks_words(shards, mistake, has):
    """Before: another shape failed in the worker's blocks ("cannot reshape array of size 4"),
    float16 on the wire ("dtype float16 cannot travel"), neither naming the parameter; a
    share added after firing happened to train right (the push reads the gradient at
    finish_step), where the other transports lost it."""
    with pytest.raises(NetworkError) as caught:
        two_workers(shards.start(1, workers=2), mistake)
    assert has in str(caught.value), caught.value


@pytest.mark.parametrize("mistake", [None, "rebind"])
def test_a_correct_layer_and_a_rebound_gradient_train_as_on_one_process(shards, mistake):
    """Neither is refused (the first pass guards each fired gradient); ``p.grad = p.grad + g``
    is another array of the right shape and dtype, which the worker reads as it is."""
    right, _ = local_run(None)
    for got in two_workers(shards.start(1, workers=2), mistake):
        for name, value in right.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-12, atol=1e-14, err_msg=name)
