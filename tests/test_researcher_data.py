"""Data sets as a researcher hands them to ``Trainer.fit``: arrays by feed name."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.data import DataError
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.optim import SGD
from distconv.sync.local import LocalSync
from distconv.trainer import TrainingError


def _trainer() -> Trainer:
    net = Network()
    net.add("fc", FullyConnected(4, 3), "x")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    return Trainer(net, LocalSync(SGD(lr=0.1)), batch_size=8)


def _data(rows: int = 64) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 4)).astype(np.float32)
    return {"x": x, "label": rng.integers(0, 3, rows)}


@pytest.mark.parametrize("which", ["training", "test"])
def test_nan_in_a_set_is_named_by_its_rows_before_a_step(which):
    """The network named the feed of the batch ("input 'x' of shape (8, 4) holds 1 NaN"),
    not the rows of the set, and only at the step that drew them: a test set's after a whole
    epoch of training."""
    train, test = _data(), _data(16)
    bad = train if which == "training" else test
    bad["x"][[3, 9], 1] = [np.nan, np.inf]
    trainer = _trainer()
    before = trainer.network["fc"].weight.value.copy()
    with pytest.raises(
        DataError, match=rf"the {which} set's 'x' holds NaN or infinity in 2 row\(s\): rows 3, 9$"
    ):
        trainer.fit(train, test, epochs=1)
    np.testing.assert_array_equal(trainer.network["fc"].weight.value, before)  # no step ran


def test_a_network_that_takes_nan_is_fed_it():
    """A network told not to check its feeds (a layer that masks NaN) is not refused them."""
    train = _data()
    train["x"][3, 1] = np.nan
    trainer = _trainer()
    trainer.network.check_finite = False
    with pytest.raises(TrainingError, match=r"loss became NaN"):  # its layers mask nothing
        trainer.fit(train, epochs=1)


@pytest.mark.parametrize("freeze", [True, False])
def test_a_fit_after_a_freeze_or_a_thaw_trains_the_parameters_that_train_now(freeze):
    """Trainer's docstring: "a fit after a freeze leaves it out". The second fit stopped at its
    first backward: "parameters fired in another order than in the first pass ... call
    reset_firing_order() after changing which parameters train"."""
    trainer = _trainer()
    weight = trainer.network["fc"].weight
    weight.set_static(not freeze)
    trainer.fit(_data(), epochs=1)
    weight.set_static(freeze)
    before = weight.value.copy()
    assert len(trainer.fit(_data(), epochs=2)) == 2  # no out_dir to resume from: 2 more
    assert np.array_equal(weight.value, before) == freeze
