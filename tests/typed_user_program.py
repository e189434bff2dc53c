"""A user's program in a typed codebase: the README's names, each imported from where the docs
name it, checked by ``mypy --strict`` in tests/test_typed_api.py (and run there, so that what
type-checks is also a program that works). ``python3 tests/typed_user_program.py FOLDER``: one
local step, a checkpoint written to FOLDER and read back, the errors a user catches."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import distconv
from distconv import Arg, Network, Parameter
from distconv.checkpoint import load_checkpoint, restore_checkpoint, save_checkpoint
from distconv.layers import Conv2D, FullyConnected, MaxPool2D, SoftmaxCrossEntropy
from distconv.optim import create_optimizer
from distconv.predict import predict_classes
from distconv.sync import LocalSync, create_sync


def build() -> tuple[Network, FullyConnected]:
    """The README's network; ``add`` hands back each layer in its own class."""
    net = Network()
    net.add("conv", Conv2D(1, 8, 3, padding=1, act="relu"), inputs="image")
    net.add("pool", MaxPool2D(2), inputs="conv")
    fc = net.add("fc", FullyConnected(8 * 4 * 4, 10), inputs="pool")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["fc", "label"])
    return net, fc


def on_gradient(param: Parameter) -> None:
    """The README's callback: fires once per parameter per pass, as soon as it is complete."""
    assert param.grad is not None  # a trainable parameter's; a static one has none
    param.value -= 0.1 * param.grad
    param.grad[...] = 0


def main(folder: Path) -> None:
    net, fc = build()
    rng = np.random.default_rng(0)
    x = rng.random((16, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, 16)
    feeds = {"image": Arg(x, needs_grad=False), "label": Arg(ids=y)}
    net.forward(feeds)
    net.backward(on_gradient)

    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    sync.setup(net.parameters())
    sync.start_step(len(y))
    net.forward(feeds)
    net.backward(sync, loss_scale=len(y))
    sync.finish_step()
    sync.close()

    save_checkpoint(folder / "model.safetensors", net.parameters(), step=1)
    checkpoint = restore_checkpoint(load_checkpoint(folder / "model.safetensors"), net.parameters())
    classes = predict_classes(net, {"image": x}, output="fc")
    chosen = create_sync("local", optimizer=create_optimizer("sgd"))
    print(checkpoint.step, fc.weight.value.shape, classes.shape, type(chosen).__name__)
    chosen.close()

    # the errors a user catches, each a name of distconv
    try:
        load_checkpoint(folder / "missing.safetensors")
    except distconv.CheckpointError as exc:
        print(type(exc).__name__)
    try:
        net.add("fc", FullyConnected(3, 3), inputs="pool")
    except distconv.NetworkError as exc:
        print(type(exc).__name__)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
