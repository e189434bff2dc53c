"""Numerical gradient checks for layers and networks, modelled on Paddle's ``LayerGradUtil``.

:func:`check_layer_grad` takes a layer and its inputs and proves, against central finite
differences of the scalar ``f = sum(output * r)`` (``r`` a fixed random array):

1. every parameter and every input that wants a gradient gets the right one, along a random
   direction aligned with the gradient (Paddle's check: the direction's signs follow the
   gradient's, so the dot product cannot cancel to nothing) and element by element on a random
   sample of entries;
2. ``backward`` run twice adds the same gradient again (gradients accumulate);
3. each parameter fires its ``inc_update`` callback once per pass, with its gradient complete:
   nothing is added to it after the callback (one that fires before its last user has added
   its share fails here, though it fires once), and nothing reads its value after it either
   (the callback may apply the optimizer: an input gradient computed from the weight after
   ``inc_update`` used the updated one). The check runs the layer alone, so a
   parameter's users are its uses inside the layer; sharing across layers is the Network's
   business and is tested there (``tests/layers/test_shared_weight.py``);
4. with every parameter static the input gradients are unchanged and no callback fires;
5. for each ``sparse_rows`` table, the rows its backward wrote are all among those it noted
   (``note_rows``, where it notes) and those noted (else written) among those its
   ``rows_read`` reports: a parameter server holds back rows left out of the notes and refuses
   rows outside those read, where every other transport trains on them.

Layer tests call it for every option; it raises ``AssertionError`` naming the array that failed.

:func:`check_network_grad` proves 1, 2, 3 and 5 (5 where the rows the layers read are known
before forward) for a whole :class:`~distconv.network.Network`, of the sum of its loss layer's
output (what its backward seeds with ones), in float64 by default, with the same finite
differences, steps and tolerances; each parameter's users are the network's. Before any, it
refuses a layer that writes into another's output or a feed, in its forward or its backward
(:mod:`distconv.written_values`): the layer whose output it was read the changed values in its
backward, and was blamed. Both put back what they change on the parameters (:func:`kept`). Both
run every forward as a training step whose draws are pinned (:mod:`distconv.layers.randomness`):
a dropout drops, and the same entries at each forward of one check, but for two decoy forwards
on other draws where a layer drew (the first, and the one before the first backward's), so that
a backward using the mask of its first forward or of the one before its latest fails.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distconv.analytic_pass import (
    analytic_pass,
    check_doubles,
    check_fired,
    check_static_pass,
)
from distconv.arg import Arg
from distconv.backend import get_array_module, is_float_dtype, resolve_dtype
from distconv.finite_differences import (
    DEFAULTS,
    KinkHere,
    NetworkObjective,
    Objective,
    check_array,
)
from distconv.gradient_check_guards import (
    _check_settings,
    _refuse_narrow,
    _refuse_not_finite,
    check_sparse_rows,
    kept,
    noting,
)
from distconv.gradient_stop import stopped_hint
from distconv.layers.base import Layer, LayerError
from distconv.network import Network, NetworkError
from distconv.network_feeds import arg_problem
from distconv.parameter import Parameter
from distconv.written_values import (
    copies_of,
    feed_copies,
    inputs_kept,
    refuse_written_inputs,
    refuse_written_values,
)


@dataclass
class GradCheckReport:
    """The largest relative difference seen for each checked array, by name."""

    diffs: dict[str, float] = field(default_factory=dict)

    @property
    def worst(self) -> float:
        return max(self.diffs.values(), default=0.0)


def _targets(obj: Objective, params: list[Parameter]) -> dict[str, tuple[Any, Any]]:
    """Name -> (owner, attribute) of every array whose gradient is checked."""
    t = {f"param {p.name}": (p, "value") for p in params if not p.static}
    for name, a in zip(obj.input_names, obj.inputs):
        if a.needs_grad:
            t[name] = (a, "value")
    return t


def check_layer_grad(
    layer: Layer,
    inputs: list[Arg],
    *,
    step: float | None = None,
    tol: float | None = None,
    elements: int = 6,
    seed: int = 0,
    check_static: bool = True,
) -> GradCheckReport:
    """Check ``layer``'s backward against finite differences; see the module docstring.

    Args:
        layer: the layer under test. Its parameters are perturbed in place and put back as
            they were, however the check ends: values, gradient arrays and their contents,
            ``static``, ``shared_count`` and the users counted so far in a pass.
        inputs: its inputs; those with ``needs_grad`` are checked too. Values, ids and
            offsets a layer writes into are put back, however the check ends.
        step: finite-difference step, finite and > 0, each entry moved by it as rounded to its
            array's dtype (the derivative is taken along that); when None by the narrower dtype
            of the output and the array checked (1e-6 float64, 1e-3 float32).
        tol: largest allowed relative difference, finite and > 0; when None by that dtype
            (1e-6 float64, 0.02 float32).
        elements: single entries (an int >= 0) of each array to check besides the direction.
        seed: for the output weighting and the directions, and the seed of what the layer
            draws (:mod:`distconv.layers.randomness`): every forward of the check trains, a
            dropout dropping, on the same draws, but for two decoy forwards on others where
            a layer drew.
        check_static: also run the all-static pass.

    Returns:
        The worst relative difference per array.

    Raises:
        AssertionError: a gradient, a callback, a static pass or a sparse table's rows noted or
            read (point 5) is wrong (the message names it),
            the output is not finite though the inputs and parameters are, or the forward or
            the backward wrote into an input's values (:mod:`distconv.written_values`).
        ValueError: nothing to check (each parameter static, no input ``needs_grad``), ``step``,
            ``tol`` or ``elements`` out of range, or ``step`` lost rounding an entry to its
            array's dtype (give a larger one); an input or a parameter holds NaN or inf that
            makes the output or a gradient not finite (no gradient can be judged), a gradient
            too small beside the rounding of a large output to be judged in its dtype, or a
            float32 comparison failed where the output bends within the step (a kink) and the
            layer does not compute in float64, where it would be made again, or computes
            another function there (it draws in its input's dtype); a comparison at a point
            that is a kink of the output (:class:`~distconv.finite_differences.KinkHere`: a
            ReLU input exactly 0 or tied maxima), once every array is checked and none is
            off; or a comparison
            failed and the output changed between two forwards at the same inputs and
            parameters (a layer drawing from a generator of its own, not the step's, or one that
            keeps state from an earlier forward: make it deterministic).
        TypeError: the layer's output, a parameter or an input it checks is not float32 or
            float64 (bfloat16, float16 ...), in which finite differences cannot tell a wrong
            gradient from a right one; or (a ``LayerTypeError``) with every parameter frozen
            by the static pass, backward added into a gradient that is None.
    """
    _check_settings(step, tol, elements)
    rng = np.random.default_rng(seed)
    params = layer.parameters()
    with kept(params), inputs_kept(inputs):
        return _check_layer(layer, inputs, params, step, tol, elements, rng, check_static, seed)


def _check_layer(
    layer: Layer,
    inputs: list[Arg],
    params: list[Parameter],
    step: float | None,
    tol: float | None,
    elements: int,
    rng: np.random.Generator,
    check_static: bool,
    draws: int,
) -> GradCheckReport:
    """:func:`check_layer_grad` on ``layer``'s ``params``, which it leaves changed; its layers
    draw from a generator of ``draws`` (:meth:`Objective.pinned`)."""
    for p in params:  # the layer alone, as a one-layer Network would count its users
        p.shared_count = sum(q is p for q in params)  # (analytic_pass's zero_grad resets the rest)
    copies = copies_of(inputs)  # before the objective's forwards, which may write into them
    obj = Objective(layer, inputs, rng, draws)
    refuse_written_inputs(obj, copies)  # else its own weight was said to be off
    if not (targets := _targets(obj, params)):  # an empty report passed any backward
        raise ValueError(
            f"{layer}: nothing to check: no parameter trains, no input needs_grad "
            "(give data as Arg(x), whose needs_grad is True)"
        )
    read = dict(layer.rows_read(inputs))
    grads, report = _check_gradients(obj, params, targets, step, tol, elements, rng, read)
    check_doubles(obj, params, grads)
    if check_static and params:
        check_static_pass(obj, params, grads)
    return report


def check_network_grad(
    net: Network,
    feeds: Mapping[str, Arg | Any],
    *,
    loss: str | None = None,
    dtype: Any = np.float64,
    inputs: bool = False,
    step: float | None = None,
    tol: float | None = None,
    elements: int = 6,
    seed: int = 0,
) -> GradCheckReport:
    """Check ``net``'s backward against finite differences of its loss; see the module docstring.

    The scalar differentiated is the sum of the loss layer's output, as ``net.backward(callback,
    loss=loss)`` seeds it; every trainable parameter's gradient (and, with ``inputs``, every
    float feed's) is compared with central differences of it, element by element on a sample
    of entries first, so that a wrong gradient is named at an entry, then along a direction;
    then two backward passes must add each gradient twice.

    Args:
        net: the network; its parameters are put back as they were, however the check ends
            (values, gradient arrays and their contents, ``static``, ``shared_count``, pending
            counts; :attr:`~distconv.network.Network.firing_order` too). It runs forwards: run
            one of your own before your next backward.
        feeds: what :meth:`~distconv.network.Network.forward` takes; left as they are (the
            check computes on copies).
        loss: the layer whose output is the loss; when None the one layer no other reads.
        dtype: what the float parameters and feeds are cast to for the check (copies; float64
            makes a tight one), or None to check them as they are.
        inputs: also check the gradients of the float feeds.
        step, tol, elements, seed: as for :func:`check_layer_grad`.

    Returns:
        The worst relative difference per array: ``param <name>``, ``input <feed>``.

    Raises:
        AssertionError: a gradient or a callback is wrong; the message names the parameter
            (or feed) and the entry, with both derivatives; or two backward passes did not add
            a parameter's gradient twice (a backward that assigns it); or a layer wrote into
            another's output or a feed in its forward or backward (the message names it and
            whose output it was).
        NetworkError: ``loss`` is no layer, or is None and several layers are read by none;
            a feed is missing or bad.
        ValueError: nothing to check (no trainable parameter, and ``inputs`` False or no float
            feed), ``step``, ``tol`` or ``elements`` out of range, or as :func:`check_layer_grad`.
        TypeError: ``dtype`` is no float type, or, with ``dtype`` None, the loss, a parameter
            or a feed checked is 16-bit.
    """
    _check_settings(step, tol, elements)
    if dtype is not None and not is_float_dtype(dtype := resolve_dtype(dtype)):
        raise TypeError(f"check_network_grad(dtype={dtype}): finite differences need a float type")
    if loss is None:
        loss = net._only_output()  # the one backward seeds when none is named
    elif loss not in net.layers:
        raise NetworkError(f"check_network_grad(loss={loss!r}): no such layer ({net.order()})")
    rng = np.random.default_rng(seed)
    params = net.parameters()
    order = net.firing_order
    with kept(params):
        originals = {id(p): (p.value,) for p in params}  # a layer may hold them (kept_hint)
        try:
            for p in params:  # copies: kept puts the parameter's own arrays back
                if is_float_dtype(p.value.dtype):
                    p.value = _copy(p.value, dtype)
                    p.grad = (
                        None if p.grad is None else get_array_module(p.value).zeros_like(p.value)
                    )
            own = _own_feeds(feeds, dtype, inputs)
            given = feed_copies(own)  # before the objective's forwards, which may write into them
            obj = NetworkObjective(net, own, loss, seed)
            obj.originals = originals
            refuse_written_values(net, obj, given)  # else blamed on the layer whose output it was
            if not (targets := _targets(obj, params)):
                raise ValueError(
                    f"{obj.subject}: nothing to check: no parameter trains"
                    + ("" if inputs else " (and inputs=False)")
                )
            try:
                read = net.rows_needed(own)
            except (NetworkError, LayerError):  # ids computed by a layer: no parameter server
                read = None
            try:
                grads, report = _check_gradients(
                    obj, params, targets, step, tol, elements, rng, read, elements_first=True
                )
            except AssertionError as exc:  # blamed on a layer below the one at fault?
                if not (hint := stopped_hint(net, obj, params)):
                    raise
                raise AssertionError(f"{exc}{hint}") from exc
            # a Network's backward starts each output's gradient (the feeds' too) from None:
            # over passes only the parameters' accumulate
            check_doubles(obj, params, {n: g for n, g in grads.items() if n.startswith("param ")})
            return report
        finally:
            net.firing_order = order


def _own_feeds(feeds: Mapping[str, Arg | Any], dtype: Any, inputs: bool) -> Any:
    """Fresh Args for ``feeds``, every array copied (a layer may write into one, and the
    caller's ids were changed): float values cast to ``dtype`` unless None, with ``needs_grad``
    as ``inputs`` says. Backward sets the feeds' gradients, and ``central`` swaps their values.
    What the network cannot read is handed on as it is, for its forward to refuse."""
    if not isinstance(feeds, Mapping):
        return feeds
    own: dict[str, Any] = {}
    for name, given in feeds.items():
        if arg_problem(name, given) is not None:
            own[name] = given
            continue
        arg = given if isinstance(given, Arg) else Arg(given, needs_grad=False)
        value, wants = arg.value, False
        if value is not None:
            floating = is_float_dtype(value.dtype)
            value, wants = _copy(value, dtype if floating else None), inputs and floating
        ids, starts = (None if a is None else copy.copy(a) for a in (arg.ids, arg.seq_starts))
        own[name] = Arg(value, seq_starts=starts, ids=ids, needs_grad=wants)
    return own


def _copy(a: Any, dtype: np.dtype | None) -> Any:
    """A copy of the array ``a``, in ``dtype`` unless that is None."""
    return a.astype(a.dtype if dtype is None else dtype)


def _check_gradients(
    obj: Objective,
    params: list[Parameter],
    targets: dict[str, tuple[Any, Any]],
    step: float | None,
    tol: float | None,
    elements: int,
    rng: np.random.Generator,
    read: Mapping[str, Any] | None,
    *,
    elements_first: bool = False,
) -> tuple[dict[str, Any], GradCheckReport]:
    """Points 1, 3 and 5 of the module docstring for ``targets``: one analytic pass, its
    callbacks and sparse rows (``read``: the rows its layers read) checked, and each gradient
    against finite differences (:func:`check_array`).

    Returns:
        The analytic gradients by name, and the worst relative difference of each.
    """
    _refuse_narrow(obj.subject, "its output", obj.dtype)
    for name, (owner, _) in targets.items():
        _refuse_narrow(obj.subject, name, np.dtype(owner.value.dtype))
    _refuse_not_finite(obj, params)
    with noting(params) as noted:
        grads, fired = analytic_pass(obj, params, passes=1)
    check_fired(obj.subject, params, fired, passes=1)
    check_sparse_rows(obj.subject, grads, noted, read)
    report = GradCheckReport()
    kinks: list[KinkHere] = []  # a wrong gradient of a later array is named before these
    for name, (owner, _) in targets.items():
        # by the narrower of the output and the array perturbed, not the output alone: a float32
        # weight under a float64 output (a float64 input promotes it) rounded float64's step of
        # 1e-6 to a few of its spacings, and a right gradient was called off
        narrower = min(obj.dtype, np.dtype(owner.value.dtype), key=lambda d: d.itemsize)
        d_step, d_tol = DEFAULTS.get(narrower, DEFAULTS[np.dtype(np.float32)])
        try:  # a given step or tol is > 0, checked above
            report.diffs[name] = check_array(
                obj,
                owner,
                grads[name],
                step or d_step,
                tol or d_tol,
                elements,
                rng,
                name,
                elements_first=elements_first,
            )
        except (AssertionError, ValueError) as exc:  # was f the same at each forward?
            if (changed := obj.changed(exc)) is not None:
                raise changed from exc
            if not isinstance(exc, KinkHere):
                raise
            kinks.append(exc)
    if kinks:
        raise kinks[0]
    return grads, report
