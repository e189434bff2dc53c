"""Where a network's analytic gradient stopped, for the failures of
:func:`~distconv.gradient_check.check_network_grad`.

A layer whose backward adds nothing into its input's gradient leaves every layer below it with
an analytic gradient of 0; the check then failed at the first of their parameters it sampled
(``conv.weight[3, 0, 1, 0] ... analytic 0``), blaming a layer below the one at fault.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.backend import get_array_module
from distconv.finite_differences import NetworkObjective
from distconv.network import Network
from distconv.parameter import Parameter


def stopped_hint(net: Network, obj: NetworkObjective, params: list[Parameter]) -> str:
    """What a failure of ``net``'s check adds where the gradient stopped: after one backward
    pass from zero at the starting point, each layer whose output got a gradient that is not
    all 0 and whose input computed by another layer got none (or only zeros), where a
    trainable parameter under that input got exactly 0 throughout though the loss moves with
    it. Empty where none does, or where the pass raises (a callback's failure is the
    message's already)."""
    for p in params:
        p.zero_grad()
    for a in obj.inputs:
        a.grad = None
    try:
        obj.backward(lambda p: None)
    except Exception:  # whatever fails here failed the check already, and says so
        return ""
    dead = [p for p in params if not p.static and p.grad is not None and not _any(p.grad)]
    below = {name: _below(net, name) for name in net.layers}
    cut = []  # read from the pass's outputs before _reaches runs forwards, which replace them
    for name in net.order():
        if not _any(net.outputs[name]):
            continue
        for given in net.wiring[name]:
            if given not in net.layers or _any(net.outputs[given]):
                continue
            under = [p for p in dead if any(_owns(net, n, p) for n in below[given])]
            cut.append((name, given, under))
    reached: dict[int, bool] = {}
    found = []
    for name, given, under in cut:
        for p in under:
            if id(p) not in reached:
                reached[id(p)] = _reaches(obj, p)
        names = [p.name for p in under if reached[id(p)]]
        if names:
            found.append(f"{name!r} (its input {given!r} got none; {names} got 0)")
    if not found:
        return ""
    return (
        f"; nothing reached the layers below {', '.join(found)}: does its backward add into "
        "its inputs' grad (where needs_grad)?"
    )


def _reaches(obj: NetworkObjective, p: Parameter) -> bool:
    """Whether the loss moves (:meth:`~distconv.finite_differences.Objective.moved`) when
    each entry of ``p`` moves by 1e-3 of itself and 1e-3 more, each way at random: a parameter
    under a ReLU dead at every unit rightly has a gradient of 0, and the ReLU was named as the
    layer that passed nothing down for a failure beside it."""
    v = p.value
    signs = np.random.default_rng(0).choice([-1.0, 1.0], v.shape)
    try:
        (moved,) = obj.values_at(p, (v + 1e-3 * (1 + abs(v)) * signs).astype(v.dtype))
    except Exception:  # a layer that refuses the moved values: no verdict on the parameter
        return False
    return obj.moved(moved)


def _any(x: Any) -> bool:
    """Whether ``x`` (an Arg's gradient, or a gradient array) holds anything but zeros."""
    if hasattr(x, "has_grad"):
        if not x.has_grad:
            return False
        x = x.grad
    return bool(get_array_module(x).any(x != 0))


def _below(net: Network, name: str) -> set[str]:
    """The layer ``name`` and every layer it reads from, directly or not."""
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in net.layers and n not in seen:
            seen.add(n)
            todo.extend(net.wiring[n])
    return seen


def _owns(net: Network, name: str, p: Parameter) -> bool:
    """Whether layer ``name`` holds ``p`` (a shared weight is held by several)."""
    return any(q is p for q in net.layers[name].parameters())
