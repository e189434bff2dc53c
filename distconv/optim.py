"""Optimizers: one update rule each, applied to raw arrays.

An optimizer holds only hyperparameters. Its state lives beside it, one dict of arrays per
parameter, created by :meth:`Optimizer.init_state` and passed back into :meth:`Optimizer.update`.
Keeping the rule free of :class:`~distconv.parameter.Parameter` objects is what lets a
parameter-server shard run the very same code on the slices of parameters it holds, and keeping
the state as arrays only (Adam's step count included) is what lets checkpoints save it as tensors.

The rules follow ``torch.optim`` (torch 2.x) in their order of operations, so a model trained
here and one trained in PyTorch from the same weights and hyperparameters stay together.
AdaGrad, Adam and RMSProp have torch's defaults too; SGD, Momentum and Nesterov default to
``lr=0.01`` (``torch.optim.SGD``: ``lr=0.001``), and Momentum and Nesterov to
``momentum=0.9`` (torch: ``momentum=0``, plain SGD). Give both sides the hyperparameters to
compare them.

The contract of a rule (see :class:`~distconv.optim_base.Optimizer`): each element's update
reads only that element's value, gradient and state, plus scalars; state buffers are shaped
like the parameter or are 0-d integer counts; ``cls(**config minus "name")`` rebuilds it. The
parameter server depends on all three: its shards cut each parameter into blocks (1 MiB by
default, :data:`~distconv.sync.ps.blocks.BLOCK_BYTES`), update each block alone, and rebuild
the optimizer from its :meth:`~distconv.optim_base.Optimizer.config`.
``tests/test_optim.py::test_update_on_slices_equals_update_on_whole`` and
``::test_config_round_trips_through_json`` check every rule in :data:`OPTIMIZERS`.

Adding an optimizer touches:

- its class here, with a ``name`` of its own (a subclass that inherits its parent's is rebuilt
  as the parent on the shards), and the tuple :data:`OPTIMIZERS` is built from, which also
  puts it through the tests of ``tests/test_optim.py`` above;
- :data:`distconv.names.OPTIMIZER_NAMES`, the names ``--optimizer`` offers
  (``tests/test_names.py`` fails until both agree), and the names listed in ``README.md``
  ("Optimizers SGD, ...") and ``docs/protocol.md`` (the seed's ``optimizer``);
- the distconv the parameter-server shards run: they build the optimizer by name from
  :data:`OPTIMIZERS` of their own install (``distconv pserver`` loads no script), so restart
  them on a distconv that has it. Each worker refuses, before its hello to them, an optimizer
  whose class is not the one its own install builds by that name, which stands for theirs
  (workers and shards of one release: :mod:`distconv.sync.ps.shard_optimizer`).

Local and MPI training run the optimizer object the script made, of whatever class.

Example:
    >>> opt = create_optimizer("adam", lr=1e-3)
    >>> state = opt.init_state(w)
    >>> opt.update(w, grad, state)          # w changes in place
    >>> opt.update(w, grad_sum, state, grad_scale=1 / n)  # the mean of n examples' gradients
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from distconv.backend import get_array_module

# imported from here, as the docs say: "X as X" re-exports them to a type checker
from distconv.optim_base import Optimizer as Optimizer
from distconv.optim_base import OptimizerConfigError as OptimizerConfigError
from distconv.optim_base import State as State
from distconv.optim_base import _check, typed
from distconv.optim_base import mean_scale as mean_scale
from distconv.optim_base import scaled_copy as scaled_copy


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


OPTIMIZERS: dict[str, type[Optimizer]] = {
    cls.name: cls for cls in (SGD, Momentum, Nesterov, AdaGrad, RMSProp, Adam)
}
#: :data:`OPTIMIZERS` as this module defines it, before any script adds to it: the classes a
#: parameter-server shard (which loads no script) builds by name
INSTALLED_OPTIMIZERS: Mapping[str, type[Optimizer]] = MappingProxyType(dict(OPTIMIZERS))


def create_optimizer(name: str, **kwargs: float) -> Optimizer:
    """The optimizer called ``name`` (case-insensitive) with the given hyperparameters.

    Raises:
        OptimizerConfigError: unknown name (or not a str), unknown hyperparameter, or a value
            out of range (a ``ValueError``), the optimizer named.
    """
    cls = OPTIMIZERS.get(name.lower()) if isinstance(name, str) else None
    if cls is None:  # None (an unset flag) was "'NoneType' object has no attribute 'lower'"
        raise OptimizerConfigError(
            f"unknown optimizer {name!r}; choose one of {sorted(OPTIMIZERS)}"
        )
    try:
        return cls(**kwargs)
    except (TypeError, OptimizerConfigError) as exc:  # an unknown keyword, a value out of range
        raise OptimizerConfigError(f"optimizer {name!r}: {exc}") from None


def optimizer_from_config(config: Mapping[str, Any]) -> Optimizer:
    """Rebuild an optimizer from :meth:`Optimizer.config`'s output."""
    if "name" not in config:
        raise OptimizerConfigError(f"optimizer config has no 'name': {dict(config)!r}")
    kwargs = {k: v for k, v in config.items() if k != "name"}
    return create_optimizer(config["name"], **kwargs)
