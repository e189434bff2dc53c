"""One backward pass's firings: the callback each parameter calls through ``inc_update``, as
:meth:`~distconv.network.Network.backward` hands it to the layers, and the check after the
pass that each trainable parameter fired once, in the first pass's order.

The network's own error class is passed in (``error``): this module does not import the
network, which imports it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from distconv.fired_writes import WriteGuard
from distconv.held_gradients import step_hold
from distconv.layers.base import Layer
from distconv.parameter import Parameter, UpdateCallback


class Firing:
    """The record of one backward pass: which parameters fired, in order, and the layer whose
    backward runs (:meth:`run`).

    Args:
        callback: the pass's callback (a sync strategy's, the Trainer's ``keep_gradient``).
        error: the exception class a refusal raises, with its message (the network's).
        guard: hold each fired gradient read-only until the backward of the layer that fired
            it returns (:class:`~distconv.fired_writes.WriteGuard`): the first pass's, where
            the callback is one :func:`~distconv.fired_writes.promises_untouched` knows. A
            strategy's that promises it is guarded on every pass, and its gradients stay
            read-only past the layer, until its step ends
            (:func:`~distconv.held_gradients.step_hold`).

    Attributes:
        fired: the parameters fired so far, in order.
        layer: the name of the layer whose backward runs now ("" before the first).
    """

    def __init__(
        self, callback: UpdateCallback, error: Callable[[str], Exception], guard: bool = False
    ) -> None:
        self.callback, self.error = callback, error
        #: where the layer's guarded gradients go as its backward ends (None: released)
        self._step_hold = step_hold(callback)
        if self._step_hold is not None:  # a second pass to the step: the strategy refuses
            self._step_hold.release()  # its fires, in its words, as it did (fired twice)
        self._guard = WriteGuard() if guard or self._step_hold is not None else None
        self.fired: list[Parameter] = []
        self.layer = ""
        self._fired_by: dict[int, str] = {}  # id of each parameter fired -> the layer's name

    def fire(self, p: Parameter) -> None:
        """What the layers are given as the callback: ``p`` recorded, then the pass's own.

        Raises:
            the ``error`` given: ``p`` fired already in this pass, or its gradient is not an
                array of its value's shape and dtype (a layer gave it another: ``p.grad =
                (p.grad + g)[:, None]``, or cast to float16). Checked here, before the
                callback, so that every transport refuses it alike: without this check one
                sync refused it without naming the layer, another failed in numpy's words,
                another trained on in float16.
        """
        first = self._fired_by.get(id(p))
        if first is not None:
            raise self.error(twice(p, first, self.layer))
        grad, value = p.grad, p.value
        try:  # a tuple and a dtype compared (numpy's dtype == costs ten times an identity)
            kind, want = grad.dtype, value.dtype
            alike = grad.shape == value.shape and (kind is want or kind == want)
        except AttributeError:  # None, a number
            alike = False
        if not alike:
            raise self.error(unlike(p, self.layer))
        self._fired_by[id(p)] = self.layer
        self.fired.append(p)
        self.callback(p)
        if self._guard is not None:
            self._guard.hold(p)

    def run(self, name: str, layer: Layer) -> None:
        """The backward of ``layer`` (named ``name`` in the network), with :meth:`fire`.

        Raises:
            the ``error`` given, where guarding: the layer wrote into a gradient it had fired
                (:class:`~distconv.fired_writes.WriteGuard`).
        """
        self.layer = name
        guard = self._guard
        if guard is None:
            layer.backward(self.fire)
            return
        kept = self._step_hold
        try:
            layer.backward(self.fire)
        except Exception as exc:
            guard.blame(exc, name, self.error)
            if kept is not None and (earlier := kept.written(exc)):  # another layer fired it
                first = earlier[0]
                raise self.error(written_after(first, self._fired_by[id(first)], name)) from exc
            raise
        finally:
            if kept is None:
                guard.release()
            else:
                guard.hand_to(kept)


def twice(p: Parameter, first: str, now: str) -> str:
    """What a second fire of ``p`` in one pass is told: which layers' backward fired it (the
    first fire's, ``first``, and this one's, ``now``), and the rule."""
    again = "again in it" if first == now else f"again in that of layer {now!r}"
    return (
        f"parameter {p.name!r} fired twice in one backward pass (first in the backward of "
        f"layer {first!r}, {again}): a parameter fires "
        f"its callback once per pass, after its last user; each layer that uses it adds its "
        f"share into p.grad, then calls p.inc_update(callback) once (the parameter counts "
        f"its {p.shared_count} user(s) in this network and fires at the last)"
    )


def written_after(p: Parameter, fired_in: str, now: str) -> str:
    """What a layer's write into the gradient of ``p``, fired in the backward of layer
    ``fired_in`` earlier in the pass, is told where the backward of layer ``now`` writes it."""
    return (
        f"layer {now!r} wrote into the gradient of {p.name!r}, which fired already in the "
        f"backward of layer {fired_in!r}: from its callback on, the gradient is the sync's "
        f"(applied, or on the wire), so this share is lost or left for the next step. A "
        f"parameter fires once per pass, after its last user: each user adds into p.grad, "
        f"and p.inc_update(callback) fires at the last (it counts {p.shared_count} user(s))"
    )


def unlike(p: Parameter, layer: str) -> str:
    """What a gradient of ``p`` unlike its value (another shape or dtype, or no array) is told
    where the backward of ``layer`` fires it: what it has and what it must have."""
    grad = p.grad
    has = (
        f"shape {tuple(grad.shape)} and dtype {grad.dtype}"
        if hasattr(grad, "shape") and hasattr(grad, "dtype")
        else f"no array ({type(grad).__name__})"
    )
    return (
        f"the gradient of {p.name!r}, fired in the backward of layer {layer!r}, has {has}; it "
        f"must have shape {tuple(p.value.shape)} and dtype {p.value.dtype}, as the parameter's "
        f"value: add the layer's share into it in place (p.grad += g, g of that shape), or "
        f"give it an array of that shape and dtype"
    )


def fired_problem(
    fired: Sequence[Parameter], trainable: Sequence[Parameter], order: Sequence[str] | None
) -> str | None:
    """Why the pass that fired ``fired`` is refused, or None: each of ``trainable`` fires
    exactly once, and in ``order`` (the first pass's names; None: this pass is the first)."""
    if len(fired) != len(trainable) or {id(p) for p in fired} != {id(p) for p in trainable}:
        times = Counter(id(p) for p in fired)
        wrong = [f"{p.name} ({times[id(p)]} times)" for p in trainable if times[id(p)] != 1]
        return (
            f"after backward every trainable parameter must fire its callback once; "
            f"{', '.join(wrong) or 'parameters outside this network fired'}. A layer's "
            f"backward calls param.inc_update(callback) once per pass for each parameter"
        )
    names = [p.name for p in fired]
    if order is None or names == list(order):
        return None
    pairs = zip(names + [None], list(order) + [None])
    i, (now, then) = next((i, ab) for i, ab in enumerate(pairs) if ab[0] != ab[1])
    return (
        f"parameters fired in another order than in the first pass: position {i} is "
        f"{now!r}, was {then!r}; call reset_firing_order() after changing which "
        f"parameters train"
    )
