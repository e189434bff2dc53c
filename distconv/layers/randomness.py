"""The random numbers a layer draws in training (a dropout's mask): one generator per step and
pass, a pure function of ``(seed, rank, step, pass)``, per thread.

The Trainer enters :func:`training_step` around each pass's forward; a layer asks
:func:`training` whether it trains (False in evaluation and prediction, outside any step, and
inside :func:`~distconv.layers.modes.forward_only`) and draws from :func:`step_generator`.
Since the generator is made afresh from those integers, a checkpoint needs no generator
state: a resumed run draws what an uninterrupted one drew, each rank draws its own numbers
and each step new ones. The gradient checks enter it with one key around every forward of a
check, so each evaluation draws the same numbers and finite differences can judge the layer;
where a layer drew, their first forward and the one before their first backward's are decoys
under other keys, so that a backward using the mask of its first forward or of the one before
its latest fails them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from distconv.layers.modes import keeps_for_backward

#: the spawn key that sets the layers' draws apart from every other stream of the same seed
#: (an arbitrary constant, "draw" in ASCII): numpy pads a short entropy list with zeros, so
#: without it the sampler's ``[seed, epoch]`` was the ``[seed, rank, step, pass]`` of rank
#: ``epoch`` at step 0, pass 0, and that step's mask was drawn from the epoch's shuffle stream
LAYER_DRAWS = 0x64726177

_state = threading.local()


def step_seed(seed: int, rank: int, step: int, pass_: int = 0) -> np.random.SeedSequence:
    """The seed sequence of the draws of ``rank`` at ``step`` (steps done before it, counted
    from the run's start) in pass ``pass_`` of that step, under the run's ``seed``."""
    return np.random.SeedSequence((seed, rank, step, pass_), spawn_key=(LAYER_DRAWS,))


@contextmanager
def training_step(seed: int, rank: int, step: int, pass_: int = 0) -> Iterator[np.random.Generator]:
    """Forward passes inside train, drawing from a generator made afresh from
    ``(seed, rank, step, pass_)`` (:func:`step_seed`); yields it. Per thread (ranks may run
    as threads); what was in force before is back on leaving.

    Entered twice with the same integers, the layers inside draw the same numbers.
    """
    previous = getattr(_state, "generator", None)
    _state.generator = np.random.default_rng(step_seed(seed, rank, step, pass_))
    try:
        yield _state.generator
    finally:
        _state.generator = previous


def training() -> bool:
    """Whether forward passes on this thread train: inside :func:`training_step` and not
    inside :func:`~distconv.layers.modes.forward_only`. A layer that draws does so only then
    (a dropout is the identity otherwise)."""
    return getattr(_state, "generator", None) is not None and keeps_for_backward()


def step_generator() -> np.random.Generator:
    """The generator of this thread's training step, which every layer of the step draws
    from in turn (in the network's order, the same at each run).

    Draw in a dtype of your own choosing (float32 uniforms, float64 normals cast to the
    input's dtype), not the input's: the gradient checks make a float32 comparison that fails
    again in float64, where ``standard_normal(shape, dtype=x.dtype)`` draws other numbers;
    they see it and keep float32's verdict, which across a kink cannot judge the layer.

    Raises:
        RuntimeError: not training (:func:`training` is False): evaluation and prediction
            draw nothing.
    """
    if not training():
        raise RuntimeError(
            "step_generator() outside a training step (evaluation, prediction, forward_only): "
            "ask distconv.layers.randomness.training() first and draw nothing then"
        )
    return _state.generator
