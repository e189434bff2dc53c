"""The analytic side of :mod:`distconv.gradient_check`'s checks: the gradients of
backward passes from zero, and the checks of each pass's callbacks (each parameter fires once,
with its gradient complete, and nothing reads its value after it fires), of two passes (they
add each gradient twice) and of a pass with every parameter static.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.backend import get_array_module
from distconv.finite_differences import Objective
from distconv.layers.base import LayerTypeError
from distconv.parameter import Parameter


def analytic_pass(obj: Objective, params: list[Parameter], passes: int) -> tuple[dict, dict]:
    """Gradients after ``passes`` backward passes from zero, and callback counts per name.

    Raises:
        AssertionError: a parameter's gradient changed after its callback fired in a pass, or
            a gradient is not finite.
        ValueError: a gradient is not finite, and an input or a parameter holds NaN or inf.
    """
    for p in params:
        p.zero_grad()
    for a in obj.inputs:
        a.grad = None
    fired: dict[str, int] = {}
    at_fire: dict[str, Any] = {}
    kept: list[tuple[Parameter, Any]] = []

    def callback(p: Parameter) -> None:
        fired[p.name] = fired.get(p.name, 0) + 1
        if p.grad is not None:  # a static one has none: the static pass names its firing
            at_fire[p.name] = (p, p.grad.copy())
        kept.append((p, p.value.copy()))
        p.value[...] = np.nan  # in place, as an optimizer changes it: nothing may read it now

    for _ in range(passes):
        at_fire.clear()
        for p in params:  # users outside the layer never come: each pass counts afresh
            p.reset_pending()
        try:
            obj.backward(callback)
        finally:
            for p, value in reversed(kept):
                p.value[...] = value
            kept.clear()
        for name, (p, grad) in at_fire.items():
            # NaN at the same places is no addition (a NaN from backward is named below)
            if not bool(get_array_module(grad).array_equal(grad, p.grad, equal_nan=True)):
                raise AssertionError(
                    f"{obj.subject}: parameter {name} fired its callback before its gradient "
                    "was complete (more was added to it afterwards)"
                )
        _check_nothing_read_after_firing(obj, params, list(at_fire))
    grads = {f"param {p.name}": p.grad.copy() for p in params if not p.static}
    for name, a in zip(obj.input_names, obj.inputs):
        if a.needs_grad:
            grads[name] = a.grad.copy()
    return grads, fired


def _check_nothing_read_after_firing(
    obj: Objective, params: list[Parameter], names: list[str]
) -> None:
    """Every gradient of the pass is finite: none was computed from a parameter the callback
    had already had (its value was NaN from then on), nor from an input or a parameter holding
    NaN or inf (ValueError naming it: an output can be finite where a gradient is not, a
    ``-inf`` input to a unit a ReLU turns off giving ``-inf * 0``, NaN, in the weight's).
    A callback is blamed only where a pass whose callbacks leave the values alone gives finite
    gradients: a NaN that backward itself made is named as such."""
    bad = _not_finite_grads(obj, params)
    if not bad:
        return
    refuse_holding_not_finite(obj, params)
    if names:  # fired: were the NaN values it left read, or did backward make the NaN itself?
        for p in params:
            p.zero_grad()  # and its pending count
        for a in obj.inputs:
            a.grad = None
        obj.backward(lambda p: None)
        if not _not_finite_grads(obj, params):
            raise AssertionError(
                f"{obj.subject}: the gradient of {', '.join(bad)} is not finite: computed from a "
                f"parameter after its callback fired (fired: {names})? The callback may change "
                "the weight, so compute input gradients before inc_update"
            )
    # no value was made NaN, or backward makes it so without: it did, of finite values
    raise AssertionError(f"{obj.subject}: the gradient of {', '.join(bad)} is not finite")


def _not_finite_grads(obj: Objective, params: list[Parameter]) -> list[str]:
    """The names of the gradients of the pass that hold NaN or inf."""
    grads = [(f"param {p.name}", p.grad) for p in params if not p.static]
    grads += [(n, a.grad) for n, a in zip(obj.input_names, obj.inputs) if a.needs_grad]
    return [name for name, g in grads if not bool(get_array_module(g).isfinite(g).all())]


def refuse_holding_not_finite(obj: Objective, params: list[Parameter]) -> None:
    """ValueError naming the first parameter or input that holds NaN or inf, if one does."""
    arrays = [(f"param {p.name}", p.value) for p in params]
    arrays += [(n, a.value) for n, a in zip(obj.input_names, obj.inputs) if a.value is not None]
    for name, v in arrays:
        if v.dtype.kind == "f" and not bool(get_array_module(v).isfinite(v).all()):
            raise ValueError(
                f"{obj.subject}: {name} holds NaN or inf; finite differences need finite values"
            )


def check_fired(subject: str, params: list[Parameter], fired: dict[str, int], passes: int) -> None:
    """Each parameter fires once per pass, after all its uses inside the layer or network
    ``subject`` names; a static one never. That each fired with its gradient complete is
    checked in :func:`analytic_pass`."""
    for p in params:
        want = 0 if p.static else passes
        got = fired.get(p.name, 0)
        if got != want:
            raise AssertionError(
                f"{subject}: parameter {p.name} fired its callback {got} times in {passes} passes"
                f" (expected {want})"
            )


def check_doubles(obj: Objective, params: list[Parameter], grads: dict[str, Any]) -> None:
    """Point 2 of :mod:`distconv.gradient_check`'s docstring: two backward passes from zero
    add each of ``grads`` (one pass's) twice, each callback fired once a pass. A backward
    that assigns a gradient (``p.grad[...] = g``) instead of adding it is right for one pass
    and passed every other check; it loses all but the last share where a weight is used by
    several layers, or gradients are accumulated over steps (``accumulate > 1``)."""
    twice, fired = analytic_pass(obj, params, passes=2)
    check_fired(obj.subject, params, fired, passes=2)
    for name, g in grads.items():
        if not bool(get_array_module(g).allclose(twice[name], 2 * g, rtol=1e-5, atol=1e-12)):
            raise AssertionError(
                f"{obj.subject}: {name}: backward twice did not double the gradient: add (+=) "
                "into p.grad and arg.grad, never assign (accumulate > 1 and weights shared "
                "across layers rely on it)"
            )


def check_static_pass(obj: Objective, params: list[Parameter], grads: dict) -> None:
    """Point 4 of :mod:`distconv.gradient_check`'s docstring: with every parameter static,
    no callback fires and the input gradients are those of ``grads``.

    Raises:
        LayerTypeError: backward added into a frozen parameter's gradient (None), saying that
            this pass froze them: the layer's own error named static parameters the user had
            not frozen, and said nothing of the check.
    """
    was = [p.static for p in params]
    try:
        for p in params:
            p.set_static(True)
        try:
            frozen, fired = analytic_pass(obj, params, passes=1)
        except LayerTypeError as exc:
            names = list(dict.fromkeys(p.name for p in params))  # one registered twice, once
            raise LayerTypeError(
                f"{obj.subject}: check_layer_grad's static pass froze every parameter "
                f"({names}), and backward then added into a frozen one's gradient, which is "
                "None: every layer must support frozen weights (guard each addition: if not "
                "p.static: p.grad += ...); check_layer_grad(..., check_static=False) skips "
                "this pass"
            ) from exc
        if fired:
            raise AssertionError(f"{obj.subject}: static parameters fired callbacks: {fired}")
        for name, g in frozen.items():
            if not bool(get_array_module(g).allclose(g, grads[name], rtol=1e-6, atol=1e-12)):
                what = f"{name} changed when the parameters were static"
                raise AssertionError(f"{obj.subject}: {what}")
    finally:
        for p, s in zip(params, was):
            p.set_static(s)
