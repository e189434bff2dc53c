"""A user's program in a typed codebase: the README's names, each imported from where the docs
name it, checked by ``mypy --strict`` in tests/test_typed_api.py (and run there, so that what
type-checks is also a program that works). ``python3 tests/typed_user_program.py FOLDER``: one
local step through a layer of one's own, a checkpoint written to FOLDER and read back, the
errors a user catches, from the package and from the modules whose calls raise them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

import distconv
from distconv import Arg, Network, Parameter
from distconv.checkpoint import (
    CheckpointError,
    CheckpointReadError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from distconv.layers import Conv2D, FullyConnected, Layer, MaxPool2D, SoftmaxCrossEntropy
from distconv.layers.inputs import grad_target
from distconv.optim import OptimizerConfigError, create_optimizer
from distconv.parameter import UpdateCallback
from distconv.predict import predict_classes
from distconv.resume import CheckpointError as ResumeCheckpointError
from distconv.runtime import RuntimeConfigError
from distconv.sync import LocalSync, create_sync
from distconv.trainer import Preempted, TrainingError


class Double(Layer):
    """A layer of one's own, as docs/architecture.md "Layers" writes one: ``_forward`` names
    its one input (``Layer._forward`` takes any signature, so this is no bad override)."""

    def _forward(self, x: Arg) -> Any:
        return 2 * x.value

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        dx = grad_target(self.inputs[0])
        if dx is not None:
            dx += 2 * dz


def build() -> tuple[Network, FullyConnected]:
    """The README's network, and a layer of one's own; ``add`` hands back each layer in its
    own class."""
    net = Network()
    net.add("conv", Conv2D(1, 8, 3, padding=1, act="relu"), inputs="image")
    net.add("pool", MaxPool2D(2), inputs="conv")
    net.add("double", Double(), inputs="pool")
    fc = net.add("fc", FullyConnected(8 * 4 * 4, 10), inputs="double")
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
    # and the same errors from the modules whose calls raise them, as their docstrings say
    same = [
        CheckpointError is ResumeCheckpointError is distconv.CheckpointError,
        CheckpointReadError is distconv.CheckpointReadError,
        OptimizerConfigError is distconv.OptimizerConfigError,
        RuntimeConfigError is distconv.RuntimeConfigError,
        Preempted is distconv.Preempted,
        TrainingError is distconv.TrainingError,
    ]
    print(all(same))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
