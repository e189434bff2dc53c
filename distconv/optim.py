"""Optimizers: one update rule each, applied to raw arrays.

An optimizer holds only hyperparameters. Its state lives beside it, one dict of arrays per
parameter, created by :meth:`Optimizer.init_state` and passed back into :meth:`Optimizer.update`.
Keeping the rule free of :class:`~distconv.parameter.Parameter` objects is what lets a
parameter-server shard run the very same code on the slices of parameters it holds, and keeping
the state as arrays only (Adam's step count included) is what lets checkpoints save it as tensors.

The rules follow ``torch.optim`` exactly (same defaults, same order of operations), so a model
trained here and one trained in PyTorch from the same weights stay together.

Example:
    >>> opt = create_optimizer("adam", lr=1e-3)
    >>> state = opt.init_state(w)
    >>> opt.update(w, grad, state)          # w changes in place
    >>> opt.update(w, grad_sum, state, grad_scale=1 / n)  # the mean of n examples' gradients
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from typing import Any, ClassVar

import numpy as np

from distconv.backend import get_array_module, is_float_dtype, sum_dtype

State = dict[str, Any]


class Optimizer:
    """Base class: hyperparameters, state layout and the in-place update rule.

    Subclasses set :attr:`name`, list the per-parameter buffers in :attr:`buffers` (zeros shaped
    like the parameter), and implement :meth:`_apply`. Weight decay (L2, added to the gradient
    as ``torch.optim`` does) is common to every rule and handled here.

    Args:
        lr: learning rate, > 0.
        **hyper: the subclass's hyperparameters; all are reported by :meth:`config`.

    Attributes:
        lr: the learning rate the rules use now: ``base_lr`` times the schedule's factor.
        base_lr: the learning rate the optimizer was built with (what :meth:`config` reports).
        hyper: the other hyperparameters, by name.
    """

    name: ClassVar[str] = "base"
    #: names of the state buffers shaped like the parameter
    buffers: ClassVar[tuple[str, ...]] = ()

    def __init__(self, lr: float, **hyper: float) -> None:
        _check("lr", lr, low=0.0, low_open=True)
        _check("weight_decay", hyper.get("weight_decay", 0.0), low=0.0)
        self.base_lr = self.lr = float(lr)
        self.hyper = {k: float(v) for k, v in hyper.items()}

    def scale_lr(self, factor: float) -> None:
        """Set the working rate to ``base_lr * factor`` (a schedule's value for this epoch).

        Raises:
            ValueError: ``factor`` is not a finite number >= 0 (NaN made every weight NaN).
        """
        _check("factor", factor, low=0.0)  # as SyncStrategy.set_lr_scale refuses it
        self.lr = self.base_lr * float(factor)

    def init_state(self, value: Any) -> State:
        """Fresh state for a parameter ``value``: arrays on ``value``'s device, of its dtype.

        Raises:
            ValueError: the rule's ``eps`` is 0 in ``value``'s dtype (1e-8 in float16), so its
                denominator would be 0 once the squared gradients underflow: a NaN step.
        """
        eps = self.hyper.get("eps", 0.0)
        if eps and is_float_dtype(value.dtype) and not value.dtype.type(eps):
            raise ValueError(
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
        """The name and every hyperparameter, JSON-able; :func:`optimizer_from_config` inverts."""
        return {"name": self.name, "lr": self.base_lr, **self.hyper}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "name")
        return f"{type(self).__name__}({args})"


class SGD(Optimizer):
    """Plain gradient descent: ``w -= lr * g``.

    Args:
        lr: learning rate.
        weight_decay: L2 penalty added to the gradient.
    """

    name = "sgd"

    def __init__(self, lr: float = 0.01, weight_decay: float = 0.0) -> None:
        super().__init__(lr, weight_decay=weight_decay)

    def _apply(self, value, grad, state, scale):
        (lr,) = typed(value, self.lr * scale)
        value -= lr * grad


class Momentum(Optimizer):
    """Heavy-ball momentum, as ``torch.optim.SGD(momentum=mu)``: ``v = mu*v + g; w -= lr*v``.

    Args:
        lr: learning rate.
        momentum: ``mu`` in [0, 1).
        weight_decay: L2 penalty added to the gradient.
    """

    name = "momentum"
    buffers = ("velocity",)
    nesterov = False

    def __init__(self, lr: float = 0.01, momentum: float = 0.9, weight_decay: float = 0.0):
        _check("momentum", momentum, low=0.0, high=1.0)
        super().__init__(lr, momentum=momentum, weight_decay=weight_decay)

    def _apply(self, value, grad, state, scale):
        mu, s, lr_s, mu_s, lr = typed(
            value,
            self.hyper["momentum"],
            scale,
            self.lr * scale,
            self.hyper["momentum"] / scale,
            self.lr,
        )
        v = state["velocity"]
        v *= mu
        # the velocity is in averaged units (the scale changes with an uneven last batch)
        v += grad if scale == 1.0 else s * grad
        if self.nesterov:  # looks ahead along the new velocity: w -= lr * (s * g + mu * v)
            value -= lr_s * (grad + mu_s * v)
        else:
            value -= lr * v


class Nesterov(Momentum):
    """Nesterov momentum, as ``torch.optim.SGD(momentum=mu, nesterov=True)``.

    Args:
        lr: learning rate.
        momentum: ``mu`` in [0, 1).
        weight_decay: L2 penalty added to the gradient.
    """

    name = "nesterov"
    nesterov = True


class AdaGrad(Optimizer):
    """Duchi et al. 2011, as ``torch.optim.Adagrad``: ``s += g*g; w -= lr*g / (sqrt(s) + eps)``.

    Args:
        lr: learning rate.
        eps: added to the denominator, > 0 (0 made a weight whose gradient is 0 NaN).
        weight_decay: L2 penalty added to the gradient.
    """

    name = "adagrad"
    buffers = ("sum_sq",)

    def __init__(self, lr: float = 0.01, eps: float = 1e-10, weight_decay: float = 0.0):
        _check("eps", eps, low=0.0, low_open=True)
        super().__init__(lr, eps=eps, weight_decay=weight_decay)

    def _apply(self, value, grad, state, scale):
        xp = get_array_module(value)
        s2, lr_s, eps = typed(value, scale * scale, self.lr * scale, self.hyper["eps"])
        s = state["sum_sq"]
        s += grad * grad if scale == 1.0 else s2 * grad * grad
        value -= lr_s * grad / (xp.sqrt(s) + eps)


class RMSProp(Optimizer):
    """Tieleman & Hinton 2012, as ``torch.optim.RMSprop``.

    ``m = alpha*m + (1-alpha)*g*g; w -= lr*g / (sqrt(m) + eps)``.

    Args:
        lr: learning rate.
        alpha: decay of the running mean of squared gradients, in [0, 1).
        eps: added to the denominator, > 0 (0 made a weight whose gradient is 0 NaN).
        weight_decay: L2 penalty added to the gradient.
    """

    name = "rmsprop"
    buffers = ("mean_sq",)

    def __init__(
        self, lr: float = 0.01, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0
    ) -> None:
        _check("alpha", alpha, low=0.0, high=1.0)
        _check("eps", eps, low=0.0, low_open=True)
        super().__init__(lr, alpha=alpha, eps=eps, weight_decay=weight_decay)

    def _apply(self, value, grad, state, scale):
        xp = get_array_module(value)
        alpha = self.hyper["alpha"]
        a, rest, lr_s, eps = typed(
            value, alpha, (1 - alpha) * scale * scale, self.lr * scale, self.hyper["eps"]
        )
        m = state["mean_sq"]
        m *= a
        m += rest * grad * grad
        value -= lr_s * grad / (xp.sqrt(m) + eps)


class Adam(Optimizer):
    """Kingma & Ba 2015, as ``torch.optim.Adam`` (L2 weight decay, not AdamW).

    The step count is state too, a 0-d int64 array, so a shard or a checkpoint carries it with
    the moments, and the bias correction is computed on the device without a round trip to the
    host.

    Args:
        lr: learning rate.
        beta1: decay of the first moment, in [0, 1).
        beta2: decay of the second moment, in [0, 1).
        eps: added to the denominator, > 0 (0 made a weight whose gradient is 0 NaN).
        weight_decay: L2 penalty added to the gradient.
    """

    name = "adam"
    buffers = ("m", "v")

    def __init__(
        self,
        lr: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        _check("beta1", beta1, low=0.0, high=1.0)
        _check("beta2", beta2, low=0.0, high=1.0)
        _check("eps", eps, low=0.0, low_open=True)
        super().__init__(lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)

    def init_state(self, value):
        state = super().init_state(value)
        state["step"] = get_array_module(value).zeros((), dtype="int64")
        return state

    def _apply(self, value, grad, state, scale):
        xp = get_array_module(value)
        b1, b2, eps = self.hyper["beta1"], self.hyper["beta2"], self.hyper["eps"]
        m, v, t = state["m"], state["v"], state["step"]
        t += 1
        beta1, beta2, eps_, g1, g2 = typed(
            value, b1, b2, eps, (1 - b1) * scale, (1 - b2) * scale**2
        )
        # the same operations in the same order as the formula, into two scratch arrays
        # instead of eight temporaries
        tmp = xp.multiply(grad, g1, out=xp.empty_like(grad))  # 0-d stays an array
        m *= beta1
        m += tmp
        xp.multiply(grad, g2, out=tmp)
        tmp *= grad
        v *= beta2
        v += tmp
        # corrections in float64 like torch's Python floats, then in the parameter's dtype
        step_size = (self.lr / (1 - b1**t)).astype(value.dtype)
        root_c2 = xp.sqrt(1 - b2**t).astype(value.dtype)
        denom = xp.sqrt(v, out=tmp)
        denom /= root_c2
        denom += eps_
        step = xp.multiply(m, step_size, out=xp.empty_like(m))
        step /= denom
        value -= step


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


OPTIMIZERS: dict[str, type[Optimizer]] = {
    cls.name: cls for cls in (SGD, Momentum, Nesterov, AdaGrad, RMSProp, Adam)
}


def create_optimizer(name: str, **kwargs: float) -> Optimizer:
    """The optimizer called ``name`` (case-insensitive) with the given hyperparameters.

    Raises:
        ValueError: unknown name (or not a str), unknown hyperparameter, or a value out of
            range.
    """
    cls = OPTIMIZERS.get(name.lower()) if isinstance(name, str) else None
    if cls is None:  # None (an unset flag) was "'NoneType' object has no attribute 'lower'"
        raise ValueError(f"unknown optimizer {name!r}; choose one of {sorted(OPTIMIZERS)}")
    try:
        return cls(**kwargs)
    except TypeError as exc:  # an unknown keyword: name the optimizer and what it takes
        raise ValueError(f"optimizer {name!r}: {exc}") from None


def optimizer_from_config(config: Mapping[str, Any]) -> Optimizer:
    """Rebuild an optimizer from :meth:`Optimizer.config`'s output."""
    if "name" not in config:
        raise ValueError(f"optimizer config has no 'name': {dict(config)!r}")
    kwargs = {k: v for k, v in config.items() if k != "name"}
    return create_optimizer(config["name"], **kwargs)


def _check(
    name: str,
    x: float,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> None:
    """Raise ValueError naming the hyperparameter unless ``low <=/< x < high``."""
    bad = (
        not isinstance(x, Real)
        or isinstance(x, bool)
        or not math.isfinite(x)  # NaN and infinity alike
        or (low is not None and (x <= low if low_open else x < low))
        or (high is not None and x >= high)
    )
    if bad:
        lo = "" if low is None else f"{low} {'<' if low_open else '<='} "
        hi = "" if high is None else f" < {high}"
        raise ValueError(f"{name} must satisfy {lo}{name}{hi}, got {x!r}")
