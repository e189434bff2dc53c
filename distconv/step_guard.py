"""What a step is checked for: the parameters' layout a sync strategy must keep
(:class:`ParamLayout`), and a step's checkpoint, before any part of it is written.

A step's checkpoint is several files (:class:`~distconv.resume.StepCheckpoints`): the chief's
part, then each parameter-server shard's. Parameters or state holding NaN or infinity, a step
or epoch that is no count and a seed that is no integer are refused here, before the step's
directory is made (its name is the step's digits); the chief's save then checks the state's
counts before any shard writes its part, so a refused checkpoint leaves no part of its step on
any disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Any

from distconv.backend import get_array_module, is_gpu_array
from distconv.checkpoint import check_savable
from distconv.fired_writes import promises_untouched
from distconv.layers.written_rows import CHECK_ROWS_VARIABLE, rows_holding
from distconv.order_agreement import agreed_firing_order
from distconv.parameter import Parameter, grads_left
from distconv.sync import SyncError, SyncStrategy
from distconv.sync.local_state import not_numbers


class TrainingError(RuntimeError):
    """Training cannot go on (the loss diverged); the message names the epoch and steps."""


def check_step_checkpoint(
    params: Sequence[Parameter],
    state: Mapping[str, Any],
    *,
    step: Any,
    epoch: Any,
    seed: Any = None,
    where: str,
) -> None:
    """Refuse a checkpoint of ``params`` and optimizer ``state`` at ``step`` and ``epoch``
    before anything of it is written: a step, epoch or ``seed`` that the chief's save would
    refuse (first: the finite check's message adds 1 to the epoch), or values that are not
    finite.

    Args:
        where: the checkpoint as a refusal names it (``"of step 7 in /run/checkpoints"``).

    Raises:
        TrainingError: a parameter or its optimizer state holds NaN or infinity.
        CheckpointError: the step, epoch or seed is one that
            :func:`~distconv.checkpoint.save_checkpoint` refuses.
    """
    check_savable(where, step=step, epoch=epoch, seed=seed)
    _check_finite(params, state, step, epoch)


def _check_finite(
    params: Sequence[Parameter], state: Mapping[str, Any], step: Any, epoch: Any
) -> None:
    """Refuse a checkpoint of parameters, or of an optimizer state, holding NaN or inf."""
    where = f"at step {step} (epoch {epoch + 1}); no checkpoint was written over the"
    where += " last finite one"
    todo = "lower the learning rate, train in a wider dtype, or check the data"
    for p in params:
        if not _finite(p.value):
            raise TrainingError(f"parameter {p.name!r} holds NaN or infinity {where}; {todo}")
    for name, entries in state.items():
        for key, value in entries.items() if isinstance(entries, Mapping) else ():
            if not _finite(value):
                raise TrainingError(
                    f"optimizer state {key!r} of parameter {name!r} holds NaN or infinity "
                    f"{where} (an update overflowed it, as a gradient too large for the "
                    f"dtype does); {todo}"
                )


def _finite(a: Any) -> bool:
    """Whether the array (numpy or cupy) or number ``a`` holds no NaN nor infinity; True for
    what holds no numbers (``None``, a string), which ``save_checkpoint`` refuses by name."""
    return not_numbers(a) is not None or bool(get_array_module(a).isfinite(a).all())


def _layout(value: Any) -> tuple[Any, Any, str]:
    """Shape, dtype and device of a parameter's value (anything, where a strategy set it)."""
    shape = getattr(value, "shape", None)
    device = "gpu" if is_gpu_array(value) else "host"
    return (None if shape is None else tuple(shape)), getattr(value, "dtype", None), device


class ParamLayout:
    """The shape, dtype and device of each trainable parameter's value as a fit begins: what a
    sync strategy keeps (in its ``setup`` too) when it gives a parameter a new array (one that
    adopts a buffer it received). A weight it reshaped failed the next forward in its layer's words,
    blaming the layer; one it widened to float64 trained on, beside float32 gradients, silently.

    Checked where it costs no step anything: after setup, at the sync's first step, at each
    epoch's end, and when a step raises (:meth:`blame`).

    Args:
        params: the parameters the sync is set up with.
        sync: the sync, or None (no fit yet).
        model: the names of every parameter of the model, frozen ones too.

    Attributes:
        order_due: whether the sync is to be told the model's firing order at the next step
            (:meth:`first_step`): it holds none, or another model's, one naming a parameter
            this model lacks or lacking one it trains (a second Trainer's on one sync, a
            shallower or deeper model of a sweep: the first's order was kept). Alike on every
            rank, each told the same order.
    """

    def __init__(
        self,
        params: Sequence[Parameter],
        sync: SyncStrategy | None = None,
        model: Set[str] = frozenset(),
    ) -> None:
        self.params = [(p, _layout(p.value)) for p in params]
        order = set(sync.firing_order) if sync is not None else set()
        trains = {p.name for p in params}  # a deeper model's, where the order is a shallower's
        self.order_due = sync is not None and not (order and order <= model and trains <= order)

    def moved(self, sync: SyncStrategy) -> SyncError | None:
        """A :class:`SyncError` naming the first parameter whose layout changed, or None."""
        for p, then in self.params:
            if (now := _layout(p.value)) != then:
                what = next(
                    f"{kind} {a if a is None else str(a)} now, {b} when the fit began"
                    for kind, a, b in zip(("shape", "dtype", "device"), now, then)
                    if a != b
                )
                return SyncError(
                    f"{type(sync).__name__} changed parameter {p.name!r}: {what}; a strategy "
                    "may give a parameter a new array, of the shape, dtype and device its "
                    "layers and gradient have"
                )
        return None

    def check(self, sync: SyncStrategy) -> None:
        """Raise :meth:`moved`'s error, if any."""
        if (error := self.moved(sync)) is not None:
            raise error

    def blame(self, sync: SyncStrategy, error: BaseException) -> None:
        """Raise :meth:`moved`'s error from ``error``, which a step raised, where the strategy
        changed a layout: the layer that failed on it was not the cause. A Ctrl-C goes on."""
        if isinstance(error, Exception) and (moved := self.moved(sync)) is not None:
            raise moved from error

    def check_rows_pushed(self, sync: SyncStrategy) -> None:
        """At an epoch's end: refuse a sparse table whose gradient a strategy that pushes by
        rows left (rows written but neither noted nor prefetched, held back unpushed): after
        the first step nothing else finds them, and their updates are lost without a word.
        One read of each table an epoch.

        Raises:
            SyncError: naming the table and the rows (:func:`held_back`).
        """
        if not pushes_by_rows(sync):
            return
        tables = [p for p, _ in self.params if p.sparse_rows]
        if kept := grads_left(tables):
            table = next(p for p in tables if p.name == kept[0])
            raise SyncError(f"sparse table {table.name!r} after an epoch: {held_back(table)}")

    def first_step(self, sync: SyncStrategy, order: Sequence[str] | None) -> None:
        """The sync's first step with this model ended (every rank calls it alike while
        :attr:`order_due`): it is told the firing order the ranks agree on, from this rank's
        ``order`` (None where it ran no backward) and the others'
        (:func:`~distconv.order_agreement.agreed_firing_order`); every gradient it took is zero
        again (one of one's own that zeroed none trained on, adding each step into every later
        one), and no layout changed. Where no rank ran a backward the order stays due."""
        agreed = agreed_firing_order(sync, order, [p.name for p, _ in self.params])
        if agreed is None:
            return
        self.order_due = False
        sync.set_firing_order(agreed)
        if kept := grads_left(p for p, _ in self.params):
            said = f"{type(sync).__name__}.finish_step() left the gradient of {kept[0]!r} nonzero"
            table = next(p for p, _ in self.params if p.name == kept[0])
            if table.sparse_rows and pushes_by_rows(sync):  # rows the push held back
                raise SyncError(f"{said}: {held_back(table)}")
            if promises_untouched(
                sync
            ):  # a shipped strategy zeroes every gradient it takes: the layer
                raise SyncError(
                    f"{said}: the strategy zeroes every gradient it takes, so a layer most likely "
                    "added to it after firing it (p.inc_update(callback) before p.grad += ...), "
                    "and the next step would add that share in again; a parameter fires once "
                    "per pass, after its last user's share is in"
                )
            raise SyncError(
                f"{said}: a strategy zeroes each gradient it takes (p.grad[...] = 0), "
                "else the next step adds it in again"
            )
        self.check(sync)


def pushes_by_rows(sync: SyncStrategy) -> bool:
    """Whether ``sync`` is a shipped strategy that pushes a sparse table by rows (a parameter
    server's), zeroing only the rows it sends: a table's gradient it leaves is rows it held
    back. One of one's own that fetches rows may zero nothing at all: not this cause."""
    return sync.fetches_rows and promises_untouched(sync)


def held_back(table: Parameter) -> str:
    """Why a sparse table's gradient is left after a step that pushes by rows: rows written
    by a backward but neither noted nor prefetched, which the push held back (not a write
    after firing: the push zeroes only the rows it sends)."""
    rows = rows_holding(table.grad)
    return (
        f"rows {[int(r) for r in rows[:8]]} ({len(rows)} in all) were written by a backward but "
        "neither noted as written (note_rows) nor prefetched (the layer's rows_read missed "
        "them): the push held them back, unpushed, and their update is lost; a layer must note "
        "every row it adds into (or none) and report every row it reads in rows_read; set "
        f"{CHECK_ROWS_VARIABLE}=1 to find the layer"
    )
