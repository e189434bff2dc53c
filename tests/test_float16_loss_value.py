"""A 16-bit loss layer's output is its float32 mean rounded to 16 bits: the Trainer's sums
(an evaluation's ``test_loss``, an epoch's loss) read that rounded number, off by up to 2**-11
of it in float16. They read the loss layer's float32 mean now, as the docs say a loss's mean is
taken in float32."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg, Network, Trainer
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss, SoftmaxCrossEntropy
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync


def per_example_losses(out: np.ndarray, data: dict[str, np.ndarray], mse: bool) -> np.ndarray:
    """Each example's loss in float64, from the model's float16 outputs."""
    z = out.astype(np.float64)
    if mse:
        return ((z - data["t"].astype(np.float16).astype(np.float64)) ** 2).mean(axis=1)
    log_prob = z - z.max(axis=1, keepdims=True)
    log_prob -= np.log(np.exp(log_prob).sum(axis=1, keepdims=True))
    return -log_prob[np.arange(len(z)), data["t"]]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mse", [True, False])
def test_a_float16_test_loss_is_the_wide_mean_not_its_rounding(mse, tmp_path):
    set_seed(0)
    rng = np.random.default_rng(4)
    data = {"x": rng.standard_normal((200, 6)).astype(np.float32)}
    if mse:
        data["t"] = (3 * rng.standard_normal((200, 3))).astype(np.float32)
    else:
        data["t"] = rng.integers(0, 3, 200)
    net = Network()
    net.add("out", FullyConnected(6, 3), "x")
    loss = MSELoss() if mse else SoftmaxCrossEntropy()
    net.add("loss", loss, ["out", "t"])
    trainer = Trainer(net, LocalSync(create_optimizer("sgd")), 16, progress=False, dtype="float16")
    got = trainer.evaluate(data)["test_loss"]  # one batch: 200 of at most 256
    feeds = {"x": data["x"].astype(np.float16), "t": data["t"]}
    if mse:
        feeds["t"] = feeds["t"].astype(np.float16)
    out = net.forward({k: v if v.dtype.kind == "f" else Arg(ids=v) for k, v in feeds.items()})
    want = per_example_losses(out["out"].value, data, mse).mean()
    assert out["loss"].value.dtype == np.float16
    assert float(out["loss"].value) != pytest.approx(want, rel=1e-6)  # the rounding shows
    assert got == pytest.approx(want, rel=1e-6)
