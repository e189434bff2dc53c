"""A ``Trainer(config=...)`` key ``layers`` (a script's ``vars(args)`` with a ``--layers``
flag) was replaced in the job check by the network's structure, which ``fit`` put under the
same key: ranks whose ``layers`` differed set up one job without a word.
Both are compared now: the config's under ``layers``, the network's beside it."""

from __future__ import annotations

import pytest

from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync import SyncError
from distconv.trainer import Trainer
from tests.sync.threaded_sync import ThreadedSync, run_ranks
from tests.test_run_scheme import DATA, _small_net

pytestmark = pytest.mark.timeout(60)


def _fit_ranks(configs, nets):
    def body(rank, world):
        sync = ThreadedSync(create_optimizer("sgd"), world, rank)
        Trainer(nets[rank], sync, 4, progress=False, config=configs[rank]).fit(DATA, epochs=1)

    run_ranks(2, body)


def test_ranks_whose_config_layers_differ_are_refused_naming_it():
    with pytest.raises(SyncError, match=r"config\.layers: (18 here, 34|34 here, 18) there"):
        _fit_ranks([{"layers": 18}, {"layers": 34}], [_small_net(), _small_net()])


def test_the_network_is_still_compared_beside_a_config_layers_key():
    nets = [_small_net(), lenet((1, 8, 8), 4, channels=(2, 4), hidden=8)]
    with pytest.raises(SyncError, match=r"config\.network layers"):
        _fit_ranks([{"layers": 18}, {"layers": 18}], nets)
    _fit_ranks([{"layers": 18}, {"layers": 18}], [_small_net(), _small_net()])  # one job
