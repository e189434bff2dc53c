"""A fit refuses parameters no longer in the float type its Trainer was made with: a later
Trainer on the same network recast them, and the first trained in that type while its config
and checkpoints recorded its own."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.mpi.common import small_lenet, trainer_data


def _trainer(net, dtype):
    return Trainer(net, LocalSync(create_optimizer("sgd", lr=0.05)), 8, dtype=dtype, progress=False)


def test_a_trainer_whose_network_another_trainer_recast_is_refused_naming_both():
    net = small_lenet(seed=3)
    t64 = _trainer(net, "float64")
    before = {p.name: p.value.copy() for p in net.parameters()}
    t32 = _trainer(net, "float32")
    with pytest.raises(TypeError) as refused:
        t64.fit(trainer_data(), epochs=1)
    assert str(refused.value) == (
        'Trainer(dtype="float64").fit: the network\'s parameters are float32 now, not the '
        "float64 they were when this Trainer was made (what its config and checkpoints "
        'record): something cast them since, such as another Trainer(dtype="float32") made '
        "on the same network (a Trainer casts its network when it is made). Train with the "
        'Trainer made last, make a new one (dtype="float32"), or cast them back '
        '(p.cast("float64") for each of network.parameters())'
    )
    for p in net.parameters():  # refused before a step: nothing trained
        np.testing.assert_array_equal(p.value, before[p.name].astype(np.float32))
    assert t32.fit(trainer_data(), epochs=1)  # the Trainer made last trains
    for p in net.parameters():
        p.cast("float64")
    assert t64.fit(trainer_data(), epochs=1)  # cast back: the first one's type again


def test_a_trainer_that_kept_the_networks_type_is_refused_once_it_is_recast():
    net = small_lenet(seed=3)  # float64
    kept = _trainer(net, None)
    _trainer(net, "float32")
    with pytest.raises(
        TypeError,
        match=r"^Trainer\(dtype=None\)\.fit: the network's "
        r"parameters are float32 now, not the float64 they were",
    ):
        kept.fit(trainer_data(), epochs=1)
