"""The names the command line offers (:mod:`distconv.names`) are the ones implemented: the lists
live apart from the code so that parsing a command needs no numpy, and they must not drift."""

from __future__ import annotations

from distconv import names
from distconv.data import DataError, load_dataset
from distconv.optim import OPTIMIZERS
from distconv.sync import TRANSPORTS


def test_the_optimizers_and_transports_offered_are_those_implemented():
    assert names.OPTIMIZER_NAMES == tuple(sorted(OPTIMIZERS))
    assert names.TRANSPORT_NAMES == tuple(sorted(TRANSPORTS))


def test_each_data_set_offered_is_one_load_dataset_knows():
    """``load_dataset`` dispatches by name: a name here it does not know would be offered by
    ``--data`` and then refused as unknown."""
    for name in names.DATASET_NAMES:
        try:
            load_dataset(name, seed=0)
        except DataError as error:  # mnist needs its directory: refused for that, not the name
            assert "unknown data set" not in str(error)
