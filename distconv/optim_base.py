"""The frame every update rule shares: :class:`Optimizer`, its state layout, the checks of
its hyperparameters and the scalar arithmetic a rule computes in.

The rules themselves and the registry that names them are in :mod:`distconv.optim`; this
module holds what a rule of one's own subclasses and calls, so the rules read as formulas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Any, ClassVar

import numpy as np

from distconv.backend import get_array_module, is_float_dtype, sum_dtype

State = dict[str, Any]


class OptimizerConfigError(ValueError):
    """An optimizer's configuration is refused: an unknown name or hyperparameter, or a
    value out of range. The user's configuration, not a bug: a script's ``run_main`` says it
    in one line, as ``distconv train`` does (:data:`distconv.user_errors.USER_ERROR_NAMES`)."""


class Optimizer:
    """Base class: hyperparameters, state layout and the in-place update rule.

    Subclasses set :attr:`name`, list the per-parameter buffers in :attr:`buffers` (zeros shaped
    like the parameter), and implement :meth:`_apply`. Weight decay (L2, added to the gradient
    as ``torch.optim`` does) is common to every rule and handled here.

    The contract every rule keeps, because a parameter-server shard cuts each parameter into
    blocks (1 MiB by default, :data:`~distconv.sync.ps.blocks.BLOCK_BYTES`), updates each
    block alone, and rebuilds the optimizer from :meth:`config` alone:

    - element-wise: the update of each element reads only that element's value, gradient and
      state, plus scalars (a rule that reads a whole parameter, such as a per-layer norm in
      LARS or LAMB, sets :attr:`elementwise` to False; the parameter server refuses it);
    - state: buffers shaped like the parameter, or 0-d integer counts (Adam's ``step``);
    - rebuildable: ``type(self)(**config minus "name")`` makes an equal optimizer, so
      ``__init__`` accepts every key :meth:`config` reports (``weight_decay`` included).

    ``tests/test_optim.py::test_update_on_slices_equals_update_on_whole`` and
    ``::test_config_round_trips_through_json`` check each rule of
    :data:`distconv.optim.OPTIMIZERS`; a rule not registered there is checked by nothing.

    Args:
        lr: learning rate, > 0.
        **hyper: the subclass's hyperparameters; all are reported by :meth:`config`.

    Raises:
        OptimizerConfigError: a hyperparameter out of range (a ``ValueError``).

    Changing the learning rate between fits (a notebook's ``fit``, look, ``fit`` again):
    call :meth:`set_base_lr`. Assigning ``optimizer.lr`` does not last: ``lr`` is the working
    rate, which the schedule sets again to ``base_lr * factor`` at every epoch's start (the
    Trainer's ``set_lr_scale(lr_decay ** epoch)``). :meth:`set_base_lr` moves ``base_lr``,
    which that schedule multiplies: under the Trainer's default ``lr_decay=1`` the new rate is
    the working rate and holds, as ``param_groups[0]["lr"] = x`` holds in PyTorch; under a
    decay it is epoch 0's, so epoch ``e`` trains at ``x * lr_decay**e``, as a run built with
    ``lr=x`` does. :meth:`config` reports it, so each fit's job check compares it between
    the ranks, and checkpoints record it: a run resumed from one made after the change must
    be built with, or set to, the new rate (refused, naming ``optimizer.lr``, where not); one
    made before it resumes at the new rate only in this optimizer, which records the rate it
    left (:attr:`earlier_base_lrs`: a Trainer's ``fit(resume=True)`` with an output
    directory goes on as one without does in memory). Every rank calls it with the same rate:
    one that did not is refused by the next fit's job check, or inside a fit by the ranks'
    per-step comparison of rates (:mod:`distconv.sync.rate_agreement`). Parameter-server
    shards apply each push at the rate it carries, and take a later fit's job at the new rate
    where every rank's hello of that fit carries it (a rank that did not change it is
    refused, named).

    Attributes:
        lr: the learning rate the rules use now: ``base_lr`` times the schedule's factor. The
            schedule (:meth:`scale_lr`) and the transports set it; a value assigned by hand
            is replaced at the next epoch's start: use :meth:`set_base_lr`.
        base_lr: the rate the schedule multiplies (what :meth:`config` reports): the one the
            optimizer was built with, or the last :meth:`set_base_lr` gave.
        lr_factor: the schedule's factor :meth:`scale_lr` last set (1.0 before any).
        earlier_base_lrs: the base rates :meth:`set_base_lr` moved away from, oldest first: a
            resume of a checkpoint written at one of them goes on at the new rate
            (:mod:`distconv.set_rate_resume`), where one built with another rate is refused.
        hyper: the other hyperparameters, by name.
    """

    name: ClassVar[str] = "base"
    #: names of the state buffers shaped like the parameter
    buffers: ClassVar[tuple[str, ...]] = ()
    #: whether each element's update reads only that element (see the class's contract); a
    #: rule that reads a whole parameter sets it False, and the parameter server refuses it
    elementwise: ClassVar[bool] = True
    #: defaults for an optimizer whose ``__init__`` skipped this one's (a subclass's own, or
    #: one unpickled from before these existed): no factor set, no rate left
    lr_factor: float = 1.0
    earlier_base_lrs: Sequence[float] = ()

    def __init__(self, lr: float, **hyper: float) -> None:
        _check("lr", lr, low=0.0, low_open=True)
        _check("weight_decay", hyper.get("weight_decay", 0.0), low=0.0)
        self.base_lr = self.lr = float(lr)
        self.lr_factor = 1.0
        self.earlier_base_lrs = []
        self.hyper = {k: float(v) for k, v in hyper.items()}

    def scale_lr(self, factor: float) -> None:
        """Set the working rate to ``base_lr * factor`` (a schedule's value for this epoch).

        Raises:
            ValueError: ``factor`` is not a finite number >= 0 (NaN made every weight NaN).
        """
        # as SyncStrategy.set_lr_scale refuses it; a schedule's bug, whose traceback shows where
        _check("factor", factor, low=0.0, error=ValueError)
        self.lr_factor = float(factor)
        self.lr = self.base_lr * self.lr_factor

    def set_base_lr(self, lr: float) -> None:
        """Train at ``lr`` times the schedule's factor from the next step on, and in every
        later epoch (the documented way to change the rate between fits; see the class).

        The working rate becomes ``lr * lr_factor`` at once: with the Trainer's default
        ``lr_decay=1`` that is ``lr`` itself, under a decay the epoch's share of it, as the
        epochs after this one get theirs. Call it between fits, or in a ``train_step``
        override before ``super().train_step``, on every rank with the same ``lr``: called
        inside a step (in forward), MPI trains that step at the rate its ranks compared as it
        began, and the new one from the next step on.

        Raises:
            OptimizerConfigError: ``lr`` is not a finite number > 0, as the optimizer's
                constructor refuses it; the rates are left as they were.
        """
        _check("lr", lr, low=0.0, low_open=True)
        if float(lr) != self.base_lr:  # a resume of a checkpoint at the rate left accepts it
            self.earlier_base_lrs = [*self.earlier_base_lrs, self.base_lr]
        self.base_lr = float(lr)
        self.lr = self.base_lr * self.lr_factor

    def lr_set_by_hand(self) -> bool:
        """Whether :attr:`lr` is not the ``base_lr * lr_factor`` that :meth:`scale_lr` and
        :meth:`set_base_lr` make: assigned by hand, which the next epoch's schedule undoes."""
        return self.lr != self.base_lr * self.lr_factor

    def init_state(self, value: Any) -> State:
        """Fresh state for a parameter ``value``: arrays on ``value``'s device, of its dtype.

        Raises:
            OptimizerConfigError: the rule's ``eps`` is 0 in ``value``'s dtype (1e-8 in
                float16), so its denominator would be 0 once the squared gradients underflow:
                a NaN step.
        """
        eps = self.hyper.get("eps", 0.0)
        if eps and is_float_dtype(value.dtype) and not value.dtype.type(eps):
            raise OptimizerConfigError(
                f"{self.name}: eps={eps:g} is 0 in {value.dtype}, so a step can divide by 0; "
                f"give an eps {value.dtype} holds (1e-4 is usual there), or train in bfloat16"
            )
        xp = get_array_module(value)
        return {key: xp.zeros_like(value) for key in self.buffers}

    def update(self, value: Any, grad: Any, state: State, grad_scale: float = 1.0) -> None:
        """Apply one step to ``value`` in place, updating ``state`` in place.

        ``grad`` is read, never written. Pure array operations, so ``value`` may be a numpy or a
        cupy array, a whole parameter or a slice of one.

        Args:
            value: the parameter, updated in place.
            grad: its gradient, or a sum of gradients that ``grad_scale`` turns into one.
            state: the parameter's state (from :meth:`init_state`), updated in place.
            grad_scale: the rule sees ``grad * grad_scale`` (a sync hands in sums over the
                step's examples and ``1 / examples``). The factor is folded into scalars the
                rule multiplies by anyway (``(lr * s) * g``), so SGD, RMSProp and Adam add no
                pass over memory; Momentum and AdaGrad form one ``s * g`` temporary (their
                state is kept in averaged units). The result equals
                ``update(value, grad * grad_scale, state)`` to an ulp or two, and bitwise for a
                power of two. The gradient is scaled first (one pass) for 16-bit parameters,
                where ``(1 - beta2) * s * s`` underflows, and for a scale of 0 or so near it
                that ``mu / s`` or ``decay / s`` could overflow float32 (``|s|`` below
                ``2**-126 * (1 + decay)``; 2**-126 is float32's least normal).

        Weight decay here is L2, added to the gradient before :meth:`_apply` for every rule.
        A rule with decoupled decay (AdamW: ``w -= lr * decay * w`` beside the step) keeps its
        rate under a name of its own (``decay``) and applies it in its ``_apply``; its
        ``__init__`` must still accept ``weight_decay`` (left 0 by its users), since
        :meth:`config` always reports it and a shard rebuilds the optimizer with
        ``cls(**config)``.
        """
        scale, decay = float(grad_scale), self.hyper.get("weight_decay", 0.0)
        if scale != 1.0 and (value.dtype.itemsize <= 2 or abs(scale) < 2.0**-126 * (1 + decay)):
            grad, scale = scaled_copy(grad, scale), 1.0
        if decay:  # s * (g + (decay / s) * w) = s * g + decay * w: the L2 term is not scaled
            grad = grad + typed(value, decay / scale)[0] * value
        self._apply(value, grad, state, scale)

    def _apply(self, value: Any, grad: Any, state: State, scale: float) -> None:
        """The rule on the gradient ``grad * scale`` (``scale`` folded into its scalars)."""
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """The name and every hyperparameter, JSON-able.

        :func:`distconv.optim.optimizer_from_config` inverts it.
        """
        return {"name": self.name, "lr": self.base_lr, **self.hyper}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "name")
        return f"{type(self).__name__}({args})"


def mean_scale(examples: int) -> float:
    """The ``grad_scale`` that turns a gradient summed over ``examples`` into their mean."""
    return 1.0 / examples if examples > 1 else 1.0


def typed(value: Any, *scalars: float) -> tuple[Any, ...]:
    """``scalars`` as numpy float32 scalars for a 16-bit parameter ``value``, the type its
    update computes in; as they are for any other (they compute in its own type already, and
    an update runs once a parameter, or a block on a shard, every step).

    A Python float meets a 16-bit array in the array's type (NEP 50: NumPy 2 for float16,
    ``ml_dtypes`` from 0.6 on for bfloat16), so the hyperparameters would be rounded first:
    beta1 = 0.9 is 0.8984 in bfloat16, beta2 = 0.999 is 1.0. A float32 scalar makes the
    operation run in float32, rounded once into the array, as PyTorch computes 16-bit tensors
    with Python scalars. (Storage still rounds: ``v * 0.999`` comes back as ``v`` in bfloat16,
    whose steps are 2**-7 of the power of two below ``v`` (0.1 % is under half a step), so a
    16-bit second moment barely decays either way; NumPy 1 and cupy before 14 computed in
    float16 and do so still.)
    """
    wide = sum_dtype(value.dtype)
    if wide is None:  # a Python float already computes in a 32- or 64-bit array's own type
        return scalars
    kind = np.dtype(wide).type
    return tuple(kind(s) for s in scalars)


def scaled_copy(grad: Any, scale: float) -> Any:
    """``grad * scale`` in ``grad``'s dtype, multiplied in float32 for a 16-bit one (one pass
    over memory): ``scale`` itself (``1 / examples``) may be subnormal in float16. Wider ones
    in their own (a float64 gradient beyond float32's range would be inf in float32).
    """
    xp, wide = get_array_module(grad), sum_dtype(grad.dtype) or grad.dtype
    out = xp.empty_like(grad)
    xp.multiply(grad, scale, out=out, dtype=wide, casting="unsafe")
    return out


def _check(
    name: str,
    x: float,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    error: type[ValueError] = OptimizerConfigError,
) -> None:
    """Raise ``error`` naming the hyperparameter unless it is a number with ``low <=/< x < high``.

    A value that is no number (a string read from a flag or a file, None, a bool) is told so:
    "lr must satisfy 0.0 < lr, got '0.1'" named a bound that ``'0.1'`` reads as meeting.
    """
    lo = "" if low is None else f"{low} {'<' if low_open else '<='} "
    hi = "" if high is None else f" < {high}"
    if isinstance(x, bool) or not isinstance(x, Real):
        got = repr(x) if x is None else f"{type(x).__name__} {x!r}"
        tip = f"; convert it first: float({x!r})" if isinstance(x, str) else ""
        raise error(f"{name} must be a number ({lo}{name}{hi}), got {got}{tip}")
    out_of_range = (
        not math.isfinite(x)  # NaN and infinity alike
        or (low is not None and (x <= low if low_open else x < low))
        or (high is not None and x >= high)
    )
    if out_of_range:
        raise error(f"{name} must satisfy {lo}{name}{hi}, got {x!r}")
