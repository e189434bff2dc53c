"""Parameter: a named array, its gradient, and the ``inc_update`` seam."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from distconv.backend import (
    ARRAY_KINDS,
    get_array_module,
    is_array,
    is_float_dtype,
    resolve_dtype,
)

__all__ = [
    "Parameter",
    "UpdateCallback",
    "callback_problem",
    "grads_left",
    "is_float_dtype",
    "keep_gradient",
    "trainable",
]


def callback_problem(callback: Any) -> str | None:
    """Why ``callback`` cannot be a backward's :data:`UpdateCallback`, or None if it can.

    Not callable (None, an optimizer where its update goes), it failed at the first complete
    parameter with "'NoneType' object is not callable", naming neither backward nor the
    callback, that parameter's gradient already added: a corrected second try added it twice.
    """
    if callable(callback):
        return None
    return (
        f"backward(callback): the callback must be a function called with each Parameter "
        f"once its gradient is complete, got {type(callback).__name__}"
    )


class Parameter:
    """A trainable (or static) array with its gradient.

    Layers add into :attr:`grad` during backward and call :meth:`inc_update` once their share
    of the gradient is in. A parameter used by ``k`` layers (``shared_count == k``) calls the
    callback once per pass, after the k-th call, as Paddle's ``Parameter::incUpdate`` does. The
    callback is where a sync strategy takes over: apply the optimizer, push to a parameter server,
    or start an allreduce, while backward goes on with the layers below.

    Args:
        name: unique name; the key in checkpoints and on the wire.
        value: the initial array (numpy or cupy); the parameter owns it. A numpy scalar
            (``np.float32(2.0)``) is taken as the 0-d array of its value.
        static: a static parameter gets no gradient and never fires its callback.
        sparse_rows: a table read a few rows per batch (an embedding, a selective FC's
            weight and bias): a parameter server then moves only the rows a batch reads,
            pulled before forward and pushed after backward (Paddle's ``sparse_update``); the
            shard's update (momentum, Adam moments, weight decay) then reaches only those rows.
            Other transports hold it whole; the flag changes no numbers there.

    Raises:
        ValueError: ``name`` is empty or not a str.
        TypeError: ``value`` is not a numpy or cupy array (a list, a Python float, a torch
            tensor).

    Attributes:
        value: the current array. A sync strategy may replace it with a new one at
            ``finish_step``: read it through the parameter, never keep it across steps.
        grad: gradient array of ``value``'s shape and dtype, or None when static.
        shared_count: how many uses of this parameter add into its gradient per pass (the
            Network counts them before each backward).
    """

    def __init__(
        self, name: str, value: Any, *, static: bool = False, sparse_rows: bool = False
    ) -> None:
        if not isinstance(name, str) or not name:  # the key in checkpoints and on the wire
            raise ValueError(f"a Parameter needs a non-empty name (a str), got {name!r}")
        if not is_array(value):
            # a list was taken, and failed far away: at repr, the layer's shape check, the
            # first update ("'list' object has no attribute 'shape'"); a torch tensor at the
            # sync's setup ("Cannot interpret 'torch.float32' as a data type")
            raise TypeError(
                f"parameter {name!r}: the value must be an array, got {type(value).__name__} "
                f"({ARRAY_KINDS}; a list or a number as np.asarray(value, dtype=np.float32))"
            )
        if isinstance(value, np.generic):
            # immutable: every update of it in place was lost, and it never trained, silently
            value = np.array(value)
        self.name = name
        self.value = value
        self.static = static
        self.sparse_rows = False
        if sparse_rows:
            self.mark_sparse_rows()
        # Any, not Optional: a callback's param.grad (None only when static) needs no narrowing
        self.grad: Any = None if static else get_array_module(value).zeros_like(value)
        self.shared_count = 0
        self._pending = 0
        self._passes = 0

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def size(self) -> int:
        return int(self.value.size)

    def inc_update(self, callback: UpdateCallback) -> None:
        """Count one user's gradient in; call ``callback(self)`` once all users are in.

        Static parameters never fire. The counter resets after firing, so the next pass starts
        afresh.
        """
        if self.static:
            return
        self._pending += 1
        if self._pending >= self.shared_count:  # 0 (never counted): fire at the first
            self._pending = 0
            self._passes += 1  # before the callback: a sync taking the pass sees it counted
            callback(self)

    @property
    def passes(self) -> int:
        """How many passes have fired the callback, ever (``keep_gradient`` included): what
        tells a pass in which no user said anything from no pass at all
        (:mod:`distconv.layers.written_rows`)."""
        return self._passes

    @property
    def users_in(self) -> int:
        """The users whose share of this pass's gradient is in (counted by :meth:`inc_update`):
        0 at a pass's start, and again once the last user's share fired the callback."""
        return self._pending

    def reset_pending(self) -> None:
        """Forget the users counted so far in this pass (a new pass starts)."""
        self._pending = 0

    def zero_grad(self) -> None:
        """Clear the gradient (and the pending count of a pass that was abandoned).

        Raises:
            SyncError: a sync's step that never ended (no ``finish_step`` or
                ``abandon_step``) holds the gradient read-only: the error names the way on.
        """
        if self.grad is not None:
            try:  # no check before: this runs for every parameter of every step
                self.grad[...] = 0
            except ValueError as exc:  # read-only: a sync's step may hold it (or another's)
                from distconv.held_gradients import refuse_zeroing  # which imports this module

                refuse_zeroing(self, exc)
                raise
        self._pending = 0

    def mark_sparse_rows(self) -> None:
        """Mark this parameter a table of rows (axis 0) that batches read a few at a time.

        The mark stays for good: every layer sharing the parameter sees it.

        Raises:
            ValueError: the value is a scalar (it has no rows).
        """
        if not getattr(self.value, "ndim", 0):
            raise ValueError(f"parameter {self.name}: a scalar has no rows to mark sparse")
        self.sparse_rows = True

    def all_rows(self) -> Any:
        """Every row id (``0 .. shape[0] - 1``), on the value's device: what a reader that
        cannot narrow its rows reads."""
        return get_array_module(self.value).arange(self.shape[0])

    def set_static(self, static: bool = True) -> None:
        """Freeze or unfreeze the parameter; a frozen one drops its gradient buffer.

        Raises:
            TypeError: unfreezing one that is not of a floating-point type (see :func:`trainable`:
                a sync's ``setup`` refuses it; unfrozen after setup, the first update failed).
        """
        if not static and self.static:
            _refuse_unless_float(self, "cast it first")
        self.static = static
        if static:
            self.grad = None
        elif self.grad is None:
            self.grad = get_array_module(self.value).zeros_like(self.value)
        self._pending = 0

    def cast(self, dtype: Any) -> None:
        """Convert the value (and gradient) to ``dtype``, e.g. float64 for exactness checks.

        Raises:
            TypeError: ``dtype`` is not a floating-point type (see :func:`is_float_dtype`): a
                weight cannot learn in integers, booleans, ``ml_dtypes``' int4, strings ...
        """
        dtype = resolve_dtype(dtype)
        if not is_float_dtype(dtype):
            raise TypeError(
                f"parameter {self.name!r} cannot train in {dtype}: "
                "a weight needs a floating-point type"
            )
        self.value = self.value.astype(dtype, copy=False)
        if self.grad is not None:
            self.grad = self.grad.astype(dtype, copy=False)

    def __repr__(self) -> str:
        kind = (", static" if self.static else "") + (", sparse_rows" if self.sparse_rows else "")
        return f"Parameter({self.name!r}, shape={self.shape}, dtype={self.value.dtype}{kind})"


#: what backward calls with each complete parameter; defined after the class, not through the
#: string "Parameter": typing.get_type_hints evaluates that string in the module of the
#: annotation that uses the alias (layers/expand.py, layers/selective_fc.py), which has no
#: Parameter: a NameError there
UpdateCallback = Callable[[Parameter], None]


def trainable(params: Iterable[Parameter]) -> list[Parameter]:
    """``params`` as a list, once each that trains (not static) holds floating-point values:
    what every sync strategy's ``setup`` takes. An integer one was taken, and every optimizer
    then failed on it at the first update, on every transport (a parameter server's shard
    failed the job: "update of parameter ... failed on shard ...").

    Raises:
        TypeError: naming the first such parameter and its dtype.
    """
    params = list(params)
    for p in params:
        if not p.static:
            _refuse_unless_float(p, "cast it, or make it static")
    return params


def keep_gradient(param: Parameter) -> None:
    """An :data:`UpdateCallback` that leaves the gradient where it is, to accumulate: the
    Trainer's for every pass of a step but the last (``accumulate``)."""


def grads_left(params: Iterable[Parameter]) -> list[str]:
    """The names of the trainable ``params`` whose gradient holds anything but zeros: what a
    sync strategy's ``finish_step`` must leave none of (each gradient it took, zeroed)."""
    return [
        p.name
        for p in params
        if p.grad is not None and bool(get_array_module(p.grad).count_nonzero(p.grad))
    ]


def setup_params(params: Sequence[Parameter]) -> list[Parameter]:
    """``params`` once each, in order, as :meth:`~distconv.sync.base.SyncStrategy.setup` takes
    them (a transport that overrides it calls this on :func:`trainable`'s list); two different
    parameters of one name are refused: the optimizer state, checkpoints and the wire know a
    parameter by its name (both were updated with one Adam state, or the second was refused as
    fired twice).

    Raises:
        ValueError: naming the name and the two shapes.
    """
    by_name: dict[str, Parameter] = {}
    for p in params:
        if by_name.setdefault(p.name, p) is not p:
            raise ValueError(
                f"two parameters are named {p.name!r} ({by_name[p.name].shape} and {p.shape}): "
                "a sync keeps state and checkpoints by name; give each its own"
            )
    return list(by_name.values())


def _refuse_unless_float(p: Parameter, fix: str) -> None:
    """TypeError naming ``p`` and ``fix`` unless its values are of a floating-point type: no
    optimizer updates any other."""
    if not is_float_dtype(p.value.dtype):
        raise TypeError(
            f"parameter {p.name!r} has dtype {p.value.dtype}: only a floating-point "
            f"parameter can train ({fix})"
        )


def name_clash(name: str, first: str, second: str) -> str:
    """Why a network refuses two different parameters named ``name``, held by layers ``first``
    and ``second``: optimizer state, checkpoints and the wire know a parameter by its name.
    Two of one layer are said to be so ("in layers 'a' and 'a'" asked to share across them)."""
    one = first == second
    where = f"both in layer {first!r}" if one else f"in layers {first!r} and {second!r}"
    return (
        f"two different parameters are named {name!r}, {where}: a parameter is known by its "
        "name (optimizer state, checkpoints); rename one"
        + ("" if one else ", or pass one Parameter to both layers to share it")
    )
