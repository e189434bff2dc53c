"""A sync strategy of your own: SGD clipped by the norm of ALL the step's gradients at once.

``LocalSync`` applies the optimizer to each gradient the moment backward completes it.
Global-norm clipping (``torch.nn.utils.clip_grad_norm_``) cannot: one factor scales every
gradient, and it depends on all of them. So this strategy holds each gradient in
``on_gradient`` and hands it to ``LocalSync.on_gradient`` in ``finish_step``, which keeps
LocalSync's averaging, zeroing, optimizer state, checkpoints (``--out``, ``--resume``) and
refusals (docs/architecture.md, "A strategy of your own: an example"). ``dist.init`` makes it
(``sync=`` a callable taking the optimizer) after the runtime checks, logging and kernel
settings every script gets::

    python examples/own_sync.py --epochs 3 --max-norm 1.0
    mpiexec -n 2 python -m mpi4py examples/own_sync.py --epochs 3 --max-norm 1.0

Across ranks the norm is that of the gradients summed over the ranks (divided by their examples
summed), known once they are reduced; the ranks' own squared norms summed with
``allreduce_sum`` are another number (``|g0 + g1|^2`` is not ``|g0|^2 + |g1|^2``). So under
MPI the script needs no strategy of its own: ``MPISync(grad_hook=...)`` calls the same
clipping (:func:`clip_by_global_norm`) once every bucket is reduced and before any update, and
every rank, holding the same sums, takes the same factor.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

import distconv.distributed as dist
from distconv import Trainer
from distconv.backend import widened
from distconv.data import load_digits
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import Optimizer
from distconv.parameter import Parameter
from distconv.runtime import detect_runtime
from distconv.script_flags import (
    add_run_flags,
    positive_float,
    print_last_epoch,
    print_result,
    refusals,
)
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync


def clip_by_global_norm(params: Sequence[Parameter], examples: int, max_norm: float) -> float:
    """Scale the gradients of ``params`` (sums over ``examples``) by one factor, so that the
    norm of their mean over every parameter is at most ``max_norm``; returns that norm before
    clipping. A norm within ``max_norm`` multiplies nothing (bit for bit)."""
    # squared and summed in float32 at least: a 16-bit gradient's squares pass float16's 65504
    # (the norm was inf, and the step scaled to nothing)
    squares = sum(float((g * g).sum()) for g in (widened(p.grad) for p in params))
    norm = math.sqrt(squares) / max(examples, 1)
    if norm > max_norm:
        for p in params:
            assert p.grad is not None  # a trainable parameter's: only a static one has none
            p.grad *= max_norm / norm
    return norm


class ClipHook:
    """:func:`clip_by_global_norm` as ``MPISync``'s ``grad_hook``: called on every rank with the
    gradients summed over the ranks and the step's global example count (on a ``grad_dtype``
    wire, or with 16-bit gradients: their averages, and 1); ``last_norm`` the
    last step's norm before clipping, kept in a private attribute: the scheme a run records
    (each checkpoint's, compared on resume) writes a hook by its public attributes, and a
    norm there made a resume warn of a sync scheme changed where nothing had."""

    def __init__(self, max_norm: float) -> None:
        self.max_norm = float(max_norm)
        self._last_norm = math.nan

    @property
    def last_norm(self) -> float:
        """The last step's norm before clipping (NaN before the first)."""
        return self._last_norm

    def __call__(self, params: Sequence[Parameter], examples: int) -> None:
        self._last_norm = clip_by_global_norm(params, examples, self.max_norm)


class GlobalNormClipSync(LocalSync):
    """World size 1: the step's gradients, averaged over its examples, scaled down together
    so that their joint L2 norm is at most ``max_norm``, then ``optimizer`` applied to each.

    Args:
        optimizer: the update rule (LocalSync runs it and keeps its state).
        max_norm: the largest norm of the step's averaged gradients over every parameter;
            ``math.inf`` clips nothing (the steps are LocalSync's, to the last bit).
    """

    def __init__(self, optimizer: Optimizer, max_norm: float = math.inf) -> None:
        super().__init__(optimizer)
        if not max_norm > 0:  # NaN too: it would leave every step unclipped without a word
            raise ValueError(f"max_norm must be a number > 0, got {max_norm!r}")
        self.max_norm = float(max_norm)
        self._held: list[Parameter] | None = None  # the step's gradients; None outside one
        self.last_norm = math.nan  # the last step's norm before clipping (to log or test)

    def describe(self) -> dict[str, float]:
        """The setting a run records in its scheme: a resume with another ``max_norm`` is then
        warned of as another sync scheme (without it, the scheme named the class alone)."""
        return {"max_norm": self.max_norm}

    def start_step(self, examples: int) -> None:
        """A step begins: LocalSync's refusals and record of it, then nothing held yet."""
        super().start_step(examples)
        self._held = []

    def on_gradient(self, param: Parameter) -> None:
        """Hold ``param``: its gradient sum stays in ``param.grad`` until :meth:`finish_step`."""
        if self._held is None:  # outside a step, or closed: the base's refusal, in its words
            self.check_gradient(param)
        self._held.append(param)  # type: ignore[union-attr]  # check_gradient raised if None

    def finish_step(self) -> None:
        """Scale the held gradients by one factor, then let LocalSync update each parameter
        (averaging by the step's examples, and zeroing the gradient) and end the step."""
        held, self._held = self._held, None
        if held is None:  # no step under way: LocalSync's refusal
            return super().finish_step()
        # the gradients are sums over the step's examples: the norm is that of their mean
        self.last_norm = clip_by_global_norm(held, self.step_examples, self.max_norm)
        for p in held:
            super().on_gradient(p)  # its check_gradient refuses one fired twice in the step
        super().finish_step()

    def abandon_step(self) -> None:
        """Nothing was updated: drop what was held (the next setup clears the gradients)."""
        self._held = None
        super().abandon_step()

    def close(self) -> None:
        """A gradient after close is refused, not held."""
        self._held = None
        super().close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    add_run_flags(parser, epochs=3, batch_size=32)
    parser.add_argument("--lr", type=positive_float, default=0.1, help="SGD's rate (%(default)s)")
    parser.add_argument(
        "--max-norm", type=positive_float, default=1.0, help="largest gradient norm (%(default)s)"
    )
    args = parser.parse_args()

    # the runtime, logging and kernel settings as every script has them, then the strategy,
    # made from the optimizer init builds: alone this one, under MPI the clipping as a hook
    # (chosen by the transport init would pick, not by the world size: under a parameter-server
    # launch an MPISync was made, and refused as one that trains alone)
    clip = ClipHook(args.max_norm)
    several = dist.choose_transport(detect_runtime()) == "mpi"
    sync = dist.init(
        "sgd",
        lr=args.lr,
        sync=(lambda opt: MPISync(opt, grad_hook=clip))
        if several
        else (lambda opt: GlobalNormClipSync(opt, args.max_norm)),
    )
    clipped = clip if several else sync  # whose last_norm the closing line reads
    assert isinstance(clipped, (ClipHook, GlobalNormClipSync))  # init's hint: a SyncStrategy
    train, test = load_digits(seed=0)
    set_seed(0)
    with refusals(parser):  # a run already in --out and no --resume: one line, not a traceback
        try:
            trainer = Trainer(
                lenet(train.image_shape, channels=(8, 16), hidden=32), sync, args.batch_size,
                out_dir=args.out, progress=False,
            )  # fmt: skip
            trainer.fit(train, test, args.epochs, resume=args.resume)
        finally:
            sync.close()
    if not sync.is_chief:  # the chief says how the run ended
        return
    if not trainer.history:  # a resume past --epochs: "nothing left to do", as the others say
        print_last_epoch(trainer, args.out)
        return
    last = trainer.history[-1]
    print_result(
        f"test accuracy {last['test_acc']:.4f} (loss {last['test_loss']:.4f}) after epoch "
        f"{last['epoch']}, gradient norm {clipped.last_norm:.3f} (max {clipped.max_norm:g})",
        epoch=last["epoch"], test_acc=last["test_acc"], test_loss=last["test_loss"],
    )  # fmt: skip


if __name__ == "__main__":
    dist.run_main(main)  # a malformed environment: one line and exit 1
