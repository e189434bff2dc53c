"""``Trainer.fit`` with ``dtype=None`` feeds float arrays as they are: float64 images
(``x / 255.0`` of uint8) made a float32 model compute in float64, about 40 % slower, without
a word. fit now says so once, on the chief."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync import create_sync
from distconv.trainer import Trainer
from tests.sync.threaded_sync import ThreadedSync, run_ranks
from tests.test_fit_checks import _one_hot_regression, _trainer

pytestmark = pytest.mark.timeout(30)


def _images(n: int, dtype, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"image": rng.random((n, 1, 8, 8)).astype(dtype), "label": rng.integers(0, 4, n)}


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "wider than the model" in r.getMessage()]


def test_float64_images_under_float32_weights_are_said_once_naming_feed_types_and_fix(caplog):
    t = _trainer()
    with caplog.at_level(logging.WARNING, logger="distconv.trainer"):
        t.fit(_images(32, np.float64), _images(8, np.float64, seed=1), epochs=2)
    assert _warnings(caplog) == [
        "the training set's 'image' (float64) and the test set's 'image' (float64) are wider "
        "than the model's float32 parameters: the layers they reach compute in float64, "
        "slower than in float32 (the parameters stay float32). Cast them "
        '(x.astype(np.float32)), or pass Trainer(dtype="float32") to cast each batch '
        '(dtype="float64" trains in float64 throughout)'
    ]
    assert t.network.outputs["conv1"].value.dtype == np.float64  # what the warning says
    assert t.params[0].value.dtype == np.float32


@pytest.mark.parametrize(
    "images, dtype",
    [
        (np.float32, None),  # the model's own type
        (np.float16, None),  # narrower: computed in float32
        (np.float64, "float32"),  # each batch cast to float32
        (np.float64, "float64"),  # a float64 model fed float64
    ],
)
def test_feeds_of_the_models_type_or_cast_to_it_are_not_said(caplog, images, dtype):
    """Nor the integer labels, fed as ids."""
    t = _trainer(dtype=dtype)
    with caplog.at_level(logging.WARNING, logger="distconv.trainer"):
        t.fit(_images(32, images), _images(8, images, seed=1), epochs=1)
    assert _warnings(caplog) == []


@pytest.mark.parametrize("x", [np.float32, np.float64])
def test_a_float64_target_read_by_a_loss_alone_is_not_said(caplog, x):
    """It widens that loss, not the model (the examples' regression targets): only a feed
    from which a layer with parameters is reached makes the model compute wider."""
    net, arrays = _one_hot_regression()
    arrays["x"] = arrays["x"].astype(x)
    assert arrays["target"].dtype == np.float64
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.1))
    t = Trainer(net, sync, 8, accuracy=None, dtype=None, progress=False)
    with caplog.at_level(logging.WARNING, logger="distconv.trainer"):
        t.fit(arrays, epochs=1)
    said = ["the training set's 'x' (float64) is wider than the model's float32 parameters"]
    assert [w.split(":")[0] for w in _warnings(caplog)] == (said if x == np.float64 else [])


def test_two_ranks_say_it_once(caplog):
    """The chief alone says it, as it says a global batch larger than the data."""

    def body(rank, world):
        net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
        sync = ThreadedSync(create_optimizer("sgd", lr=0.01), world, rank)
        Trainer(net, sync, 8, progress=False).fit(_images(32, np.float64), epochs=1)

    with caplog.at_level(logging.WARNING, logger="distconv.trainer"):
        run_ranks(2, body)
    assert _warnings(caplog) == [
        "the training set's 'image' (float64) is wider than the model's float32 parameters: "
        "the layers it reaches compute in float64, slower than in float32 (the parameters "
        'stay float32). Cast it (x.astype(np.float32)), or pass Trainer(dtype="float32") to '
        'cast each batch (dtype="float64" trains in float64 throughout)'
    ]
