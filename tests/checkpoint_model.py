"""The small model and save call that the checkpoint tests share."""

from __future__ import annotations

import numpy as np

from distconv.checkpoint import save_checkpoint
from distconv.optim import Adam
from distconv.parameter import Parameter


def small_model(seed: int = 0) -> list[Parameter]:
    """Four float32 parameters of the shapes a checkpoint meets: 4-d, 1-d, 2-d with a slash in
    the name, and 0-d."""
    rng = np.random.default_rng(seed)
    return [
        Parameter("conv1.weight", rng.standard_normal((4, 1, 3, 3)).astype(np.float32)),
        Parameter("conv1.bias", rng.standard_normal(4).astype(np.float32)),
        Parameter("fc/1.weight", rng.standard_normal((3, 5)).astype(np.float32)),
        Parameter("scale", np.array(rng.standard_normal(), np.float32)),  # 0-d stays 0-d
    ]


def adam_state(params: list[Parameter], steps: int = 2):
    """Adam and its state after ``steps`` updates with gradient one, so ``m`` and ``v`` are set."""
    opt = Adam(lr=0.1)
    state = {p.name: opt.init_state(p.value) for p in params}
    for _ in range(steps):
        for p in params:
            opt.update(p.value, np.ones_like(p.value), state[p.name])
    return opt, state


def save_small(path, params: list[Parameter], state, **kw) -> None:
    """Save with fixed metadata (step 7, epoch 2, seed 42, Adam lr 0.1) unless ``kw`` says."""
    kw.setdefault("step", 7)
    kw.setdefault("epoch", 2)
    save_checkpoint(path, params, state, seed=42, optimizer={"name": "adam", "lr": 0.1}, **kw)
