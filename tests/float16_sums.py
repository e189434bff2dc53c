"""A float16 model whose gradients, summed over a batch of 512, pass float16's 65,504 while
every per-example gradient and their mean (about -200, the bias's) fit: a fully connected layer
(4 to 1) under a mean squared error, inputs about 1 and targets 100, its outputs about 0.
Shared by the local test (tests/test_float16_gradient_sums.py) and the two ranks' runner
(tests/mpi/run_float16_sums.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from distconv import Network, Trainer
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss
from distconv.sync import SyncStrategy

#: each rank's batch: 512 examples of a mean bias gradient of about -200 sum to about -100,000
BATCH = 512


def summing_data(n: int, seed: int) -> dict[str, np.ndarray]:
    """``n`` examples: inputs near 1, targets near 100."""
    rng = np.random.default_rng(seed)
    x = 1 + 0.01 * rng.standard_normal((n, 4))
    t = 100 + 0.01 * rng.standard_normal((n, 1))
    return {"x": x.astype(np.float32), "t": t.astype(np.float32)}


def fit_float16(sync: SyncStrategy, out: Path) -> None:
    """One epoch of two steps (``BATCH`` examples a rank each) of the model in float16."""
    set_seed(0)
    net = Network()
    net.add("out", FullyConnected(4, 1), "x")
    net.add("loss", MSELoss(), ["out", "t"])
    trainer = Trainer(net, sync, BATCH, out_dir=out, progress=False, dtype="float16")
    trainer.fit(summing_data(2 * BATCH * sync.world_size, 1), summing_data(64, 2), 1)
