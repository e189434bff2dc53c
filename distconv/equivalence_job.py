"""The job of the equivalence check (:mod:`distconv.equivalence`): what the reference and every
rank train, and how.

:class:`Job` holds the check's settings: its model (:func:`model`, a small float64 LeNet, or a
model of one's own), its data (:func:`training_data`, or one's own), the update rule and the
epochs, and where it stops and resumes (``restart_at``); :meth:`Job.fit` trains a model on it
through the real :class:`~distconv.trainer.Trainer`. :data:`JOB` is the check's job and
:data:`RESUMED_JOB` the one that restarts mid-way; :func:`weights` is what the check compares.
Every name here is importable from :mod:`distconv.equivalence` too.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from distconv.backend import to_host
from distconv.init import set_seed
from distconv.models import lenet
from distconv.network import Network
from distconv.optim import Optimizer, create_optimizer

if TYPE_CHECKING:
    from distconv.sync.base import SyncStrategy

#: weights by parameter name
Weights = dict[str, np.ndarray]


def model(seed: int = 0, channels: Sequence[int] = (2, 3), hidden: int = 8) -> Network:
    """The check's model: a small LeNet on 8x8 images of 4 classes (two conv/pool stages of
    ``channels``, then ``hidden`` units), every parameter float64, initialised from ``seed``
    (:func:`~distconv.init.set_seed` first: two models built in one process draw alike only
    so)."""
    set_seed(seed)
    net = lenet((1, 8, 8), 4, channels=tuple(channels), hidden=hidden)
    for p in net.parameters():
        p.cast(np.float64)
    return net


def training_data(examples: int, seed: int = 3) -> dict[str, np.ndarray]:
    """``examples`` random float64 images for :func:`model` (``image``) and their classes
    (``label``), drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    return {
        "image": rng.standard_normal((examples, 1, 8, 8)),
        "label": rng.integers(0, 4, examples),
    }


def weights(net: Network) -> Weights:
    """Every parameter's value by name, a host copy."""
    return {p.name: to_host(p.value).copy() for p in net.parameters()}


@dataclasses.dataclass(frozen=True)
class Job:
    """What the reference and every rank train (the defaults are the check's).

    Attributes:
        batch_size: examples per pass on each rank (the reference takes world size times it).
        epochs: epochs trained; ``lr_decay`` makes each a ``set_lr_scale`` of its own.
        examples: the training set's size; None: 5½ global batches and one example, so the
            last step is uneven at any world size, every rank getting at least one example
            in it. A job whose last step leaves a rank none (``examples`` of 5 whole steps
            and ``world_size - 1``: 41 for 2 ranks) checks a transport's step with no
            examples on a rank, which the default job does not.
        accumulate: passes per step.
        optimizer, lr, lr_decay: the update rule. Adam's state starts as zeros on every rank,
            so a transport that broadcasts the parameters at setup but not the optimizer
            state passes: only a resumed run (``restart_at``), its state loaded on rank 0,
            shows that.
        seed: the shuffle seed, the same on every rank; rank 0 builds its model from seed 0,
            rank r from ``100 + r`` (a resumed rank r from ``200 + r``).
        channels, hidden: the size of :func:`model`, the check's LeNet.
        model: a model of one's own instead of the LeNet (a layer's author checks their
            layers so): ``model(seed)`` returns a new :class:`~distconv.network.Network`,
            called with the seed of the rank's model above after ``set_seed(seed)``, so
            weights made by ``make_weight`` draw from it (ranks that start apart show a
            missing broadcast). Its loss layer is named ``loss``; the Trainer casts the
            parameters to float64. None: :func:`model` of ``channels`` and ``hidden``.
        dataset: the training set of one's own model: ``dataset(examples)`` returns what
            :meth:`~distconv.trainer.Trainer.fit` takes (feeds by name, each ``examples``
            rows), the same at every call (the reference and every rank train on it). None:
            :func:`training_data`, images and classes. :func:`assert_matches_local` pickles
            both to its processes: give module-level functions (or partials of them).
        restart_at: 0 trains in one go. n >= 1: each rank sends itself SIGTERM after step n
            and the ranks stop at the first step from there they agree on, with a
            checkpoint (n itself on one rank, else the next multiple of
            :data:`~distconv.stop_agreement.STOP_CHECK_EVERY`, or the fit's last step, a
            check too); then new syncs and models
            resume to the end (:mod:`distconv.equivalence_restart`). The reference does not
            stop. A stop past the job's last step is a ``ValueError``, before anything
            trains; one the process was asked for from outside (a scheduler's SIGTERM
            first, a Ctrl-C) raises its ``Preempted``, not taken for the check's.
    """

    batch_size: int = 4
    epochs: int = 3
    examples: int | None = None
    accumulate: int = 1
    optimizer: str = "adam"
    lr: float = 0.01
    lr_decay: float = 0.7
    seed: int = 0
    channels: tuple[int, ...] = (2, 3)
    hidden: int = 8
    restart_at: int = 0
    model: Callable[[int], Network] | None = None
    dataset: Callable[[int], Any] | None = None

    def global_batch(self, world_size: int) -> int:
        return world_size * self.batch_size * self.accumulate

    def example_count(self, world_size: int) -> int:
        """The training set's size at ``world_size`` (``examples``, or its default)."""
        step = self.global_batch(world_size)
        return 5 * step + step // 2 + 1 if self.examples is None else self.examples

    def data(self, world_size: int) -> Any:
        """The training set (the same on every rank and in the reference): ``dataset``'s,
        or the check's images and classes."""
        count = self.example_count(world_size)
        return training_data(count) if self.dataset is None else self.dataset(count)

    def make_optimizer(self) -> Optimizer:
        """A new optimizer of the job's rule and rate: each sync gets its own."""
        return create_optimizer(self.optimizer, lr=self.lr)

    def model_of(self, rank: int, resumed: bool = False) -> Network:
        """Rank ``rank``'s model before its strategy's setup (``resumed``: before the setup
        that resumes it, drawn from other seeds, so that only a restore makes it the job's)."""
        seed = 200 + rank if resumed else 0 if rank == 0 else 100 + rank
        if self.model is None:
            return model(seed, self.channels, self.hidden)
        set_seed(seed)  # the initialisers' stream, as model() seeds it
        net = self.model(seed)
        if not isinstance(net, Network):  # else refused in the Trainer, naming no job
            raise TypeError(f"Job.model({seed}) returned {type(net).__name__}, not a Network")
        return net

    def fit(
        self,
        net: Network,
        sync: SyncStrategy,
        batch_size: int,
        world_size: int,
        *,
        out_dir: str | os.PathLike | None = None,
        resume: bool = False,
        stop_after: int = 0,
    ) -> None:
        """Train ``net`` through ``sync`` with ``batch_size`` a pass, on the data of a job of
        ``world_size`` ranks; with ``out_dir``, checkpointing there every few steps, resuming
        where ``resume``; ``stop_after`` n >= 1: stopped by SIGTERM after step n
        (:class:`~distconv.equivalence_restart.StopAfter`)."""
        from distconv.trainer import Trainer  # the data and sync modules, when a check runs

        kind, stop = Trainer, {}
        if stop_after:
            from distconv.equivalence_restart import StopAfter

            kind, stop = StopAfter, {"stop_after": stop_after}
        trainer = kind(
            net,
            sync,
            batch_size,
            accumulate=self.accumulate,
            seed=self.seed,
            lr_decay=self.lr_decay,
            dtype="float64",
            progress=False,
            out_dir=out_dir,
            checkpoint_every=CHECKPOINT_EVERY if out_dir is not None else 0,
            **stop,
        )
        trainer.fit(self.data(world_size), epochs=self.epochs, resume=resume)


#: the check's job
JOB = Job()
#: the check's job stopped after its 8th step (2 ranks or more: 8 is when they agree on a stop),
#: the second epoch's second of 6, Adam's moments far from zero, and resumed to the end
RESUMED_JOB = Job(restart_at=8)
#: a job with an output directory checkpoints every this many steps, as a long job does; the
#: stop's checkpoint is the newest, the one a restart resumes
CHECKPOINT_EVERY = 3
