"""Which layer wrote into another layer's output (or a feed), for
:func:`~distconv.gradient_check.check_network_grad`.

A layer whose forward writes into its input (``v = x.value; v *= g``) changes the output of the
layer below after that layer made it, and the layer below reads the changed values in its
backward (a tanh's derivative is taken from its output): the check failed at that layer's
weight, ``gradient of param act.weight[1, 1, 1, 0] is off``, naming a layer that is right. A
backward that writes into its input's values does the same to the layer below, whose backward
runs after it. The check refuses either before it compares a gradient, naming the layer that
wrote and the one whose output it was. It costs one forward of its own, each output copied as
it is made and compared once the forward is done (a second, comparing after each layer, only
where one changed, to find the layer that wrote), and one forward and backward, each output
copied after the forward and compared after the backward (a second, comparing after each
layer's backward, only where one changed). A backward that writes into its own layer's output
alone is let be: the layers that read it ran their backward before. Training runs none of this.

:func:`~distconv.gradient_check.check_layer_grad` refuses a layer that writes into its own
inputs alike (it was told that its weight's gradient was off, or that backward twice did not
double it), and puts back the caller's arrays it wrote into.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from distconv.arg import Arg
from distconv.backend import get_array_module, is_float_dtype
from distconv.finite_differences import NetworkObjective, Objective
from distconv.network import Network

#: what a forward must do instead, for the messages
_ADVICE = (
    "a layer must not write into its inputs' values (v = x.value; v *= g): compute a new "
    "array (x.value * g)"
)


def copies_of(args: Iterable[Arg]) -> list[tuple[Any, Any, Any]]:
    """Copies of each Arg's values, ids and offsets, to compare with after the forwards that
    build the check's objective: a write of the values it read (an in-place ReLU, a clip)
    changes nothing at any forward after the first, which copies taken after it could not
    tell."""
    return [_copy(a) for a in args]


def feed_copies(feeds: Any) -> dict[str, tuple]:
    """The arrays of each Arg in ``feeds`` (the check's own), by name, with copies of them
    (:func:`copies_of`), for :func:`_restore`."""
    if not isinstance(feeds, Mapping):  # the network's forward refuses it
        return {}
    return {name: _kept(arg) for name, arg in feeds.items() if isinstance(arg, Arg)}


def refuse_written_values(net: Network, obj: NetworkObjective, feeds: dict[str, tuple]) -> None:
    """Raise ``AssertionError`` naming the layer of ``net`` whose forward or backward wrote into
    another layer's output or a feed of ``obj`` (the check's copies; ``feeds`` their values and
    ids as given, before any forward), and whose it was.

    A backward that raises is left to the check, which names what fails in it."""
    problem = _forward_problem(net, obj, feeds) or _backward_problem(net, obj, feeds)
    if problem:
        raise AssertionError(f"{obj.subject}: {problem}")


def refuse_written_inputs(obj: Objective, copies: list[tuple[Any, Any, Any]]) -> None:
    """Raise ``AssertionError`` where the layer of ``obj`` (:func:`~distconv.gradient_check.
    check_layer_grad`'s) writes into an input's values in a forward or a backward: the check
    said that its own weight's gradient was off, or that backward twice did not double it
    (saying to add, not assign). ``copies`` are the inputs' (:func:`copies_of`) before the
    forwards that built ``obj``. A backward that raises is left to the check."""
    layer, inputs = obj.layer, obj.inputs
    for when in ("forward", "backward"):
        changed = [
            f"input {i}"
            for i, (a, c) in enumerate(zip(inputs, copies))
            if not all(_same(now, then) for now, then in zip(_arrays(a), c))
        ]
        if changed:
            raise AssertionError(
                f"{obj.subject}: its {when} wrote into {_listed(changed)}; {_ADVICE}"
            )
        if when == "backward":  # compared after the one backward
            return
        layer.output.grad = obj.r.copy()
        try:
            layer.backward(lambda p: None)
        except Exception:  # the analytic pass names what fails there
            return


@contextmanager
def inputs_kept(inputs: list[Arg]) -> Iterator[None]:
    """Put back the values, ids and offsets of ``inputs`` (the caller's arrays, in place)
    that a layer wrote into during the check, and the arrays themselves where it rebound one
    (an input trimmed by ``x.value = x.value[:, :2]``), however it ends."""
    kept = [_kept(a) for a in inputs]
    try:
        yield
    finally:
        for a, what in zip(inputs, kept):
            _restore(a, what)


def _kept(arg: Arg) -> tuple:
    """``arg``'s arrays, and copies of them, for :func:`_restore`."""
    return _arrays(arg), _copy(arg)


def _restore(arg: Arg, kept: tuple) -> None:
    """Give ``arg`` back the arrays :func:`_kept` found, and their values: a layer that
    rebound one (``x.value = x.value[:, :2]``) left it another, of another shape, into which
    the copy could not be written."""
    (arg.value, arg.ids, arg.seq_starts), copy = kept
    _put_back(arg, copy)


def _put_back(arg: Arg, copy: tuple[Any, Any, Any]) -> None:
    """Write ``copy`` (:func:`_copy`'s) back into ``arg``'s arrays where they differ."""
    for now, then in zip(_arrays(arg), copy):
        if now is not None and then is not None and not _same(now, then):
            if hasattr(now, "dtype"):
                now[...] = then
            else:  # offsets given as a list
                now[:] = then


def _forward_problem(net: Network, obj: NetworkObjective, feeds: dict[str, tuple]) -> str | None:
    """What a forward wrote into after it was made, and which layer wrote it; None where
    nothing changed."""
    _, changed = _walk(net, obj, feeds, None)
    if not changed:
        return None
    writer, written = _walk(net, obj, feeds, changed)
    if writer is None:  # the second forward wrote nothing: random, or state it kept
        return f"{_what(net, changed)} changed during the forward after it was made; {_ADVICE}"
    said = f"the forward of {net.layers[writer].label} wrote into {_what(net, written)}"
    if not any(n in net.layers for n in written):  # feeds alone: each later forward reads them
        return f"{said}; {_ADVICE}. Each later forward reads the changed feed"
    return (
        f"{said} after it was made; {_ADVICE}. Its maker's backward may read it (an "
        "activation's derivative is taken from its output) and its gradients come out wrong, "
        "which the check would blame on its weights"
    )


def _backward_problem(net: Network, obj: NetworkObjective, feeds: dict[str, tuple]) -> str | None:
    """What a backward wrote into of the forward's outputs and feeds, and which layer wrote it;
    None where nothing changed but outputs written by their own maker's backward (nothing reads
    an output after that), or where a backward raises."""
    values = _pinned_forward(net, obj, feeds)
    copies = {name: _copy(arg) for name, arg in values.items()}
    try:
        net.backward(_ignore, loss=obj.loss)
    except Exception:  # the analytic pass names what fails there
        return None
    if not (changed := _changed(values, copies, copies)):
        return None
    writer, written, own = _backward_walk(net, obj, feeds, changed)
    if writer is None:
        if set(changed) <= set(own):
            return None
        return f"{_what(net, changed)} changed during the backward; {_ADVICE}"
    reads = any(n in net.wiring[writer] for n in written)
    said = (
        f"the backward of {net.layers[writer].label} wrote into {_what(net, written)}"
        f"{', which it reads' if reads else ''}; {_ADVICE}"
    )
    if not any(n in net.layers for n in written):  # feeds alone
        return f"{said}. Each later forward reads the changed feed"
    return (
        f"{said}. The backward of the layer that made it runs after, and may read it (an "
        "activation's derivative is taken from its output): its gradients come out wrong, "
        "which the check would blame on its weights"
    )


def _backward_walk(
    net: Network, obj: NetworkObjective, feeds: dict[str, tuple], watch: list[str]
) -> tuple[str | None, list[str], list[str]]:
    """A pinned forward and a backward of ``net`` (:meth:`~distconv.network.Network.
    backward_watched`: the pass training runs, prepared as it prepares it), comparing ``watch``
    after each layer's backward: (the first layer whose backward changed one but its own
    output, those), or (None, []), each with the layers whose backward wrote into their own
    output alone, which is left alone (the layers that read it ran their backward before). The
    readers of a changed output were named, an innocent one among them."""
    values = _pinned_forward(net, obj, feeds)
    copies = {name: _copy(values[name]) for name in watch}
    own: list[str] = []
    found: list[tuple[str, list[str]]] = []

    def compare(name: str) -> bool:
        if (changed := _changed(values, copies, watch)) == [name]:
            own.append(name)
            copies[name] = _copy(values[name])
        elif changed:
            found.append((name, [n for n in changed if n != name]))
        return bool(found)

    try:
        net.backward_watched(_ignore, compare, loss=obj.loss)
    except Exception:  # the first backward did not raise: changed on the way
        pass
    writer, written = found[0] if found else (None, [])
    return writer, written, own


def _pinned_forward(
    net: Network,
    obj: NetworkObjective,
    feeds: dict[str, tuple],
    after: Callable[[str, dict[str, Arg]], bool] | None = None,
) -> dict[str, Arg]:
    """A forward of ``net`` on ``obj``'s feeds, put back to ``feeds`` first, its draws pinned,
    with ``after`` (:meth:`~distconv.network.Network.forward_watched`)."""
    for name, kept in feeds.items():
        if isinstance(arg := obj.feeds.get(name), Arg):
            _restore(arg, kept)
    with obj.pinned():
        return net.forward_watched(obj.feeds, after)


def _ignore(p: Any) -> None:
    """A callback that does nothing: the probes apply no update."""


def _walk(
    net: Network, obj: NetworkObjective, feeds: dict[str, tuple], watch: list[str] | None
) -> tuple[str | None, list[str]]:
    """A forward of ``net`` (:func:`_pinned_forward`: each feed put back to ``feeds``, its
    values as given, first), each output copied as it is made. With ``watch`` None, compared
    once the forward is done: (None, the names whose values changed). Else those of ``watch``
    are compared after each layer's forward: (the first layer after which one differs, those),
    or (None, [])."""
    copies = {name: feeds[name][1] for name in net.feed_names if name in feeds}
    found: list[tuple[str, list[str]]] = []

    def copy(name: str, values: dict[str, Arg]) -> bool:
        copies[name] = _copy(values[name])
        if watch is not None and (changed := _changed(values, copies, watch)):
            found.append((name, changed))
        return bool(found)

    values = _pinned_forward(net, obj, feeds, copy)
    if watch is not None:
        return found[0] if found else (None, [])
    return None, _changed(values, copies, copies)


def _arrays(arg: Arg) -> tuple[Any, Any, Any]:
    """``arg``'s arrays a layer may write into: its values, ids and sequence offsets."""
    return arg.value, arg.ids, arg.seq_starts


def _copy(arg: Arg) -> tuple[Any, Any, Any]:
    """Copies of ``arg``'s values, ids and offsets (:func:`_arrays`; any may be None; offsets
    given as a list are copied as a list)."""
    return tuple(
        a if a is None else a.copy() if hasattr(a, "dtype") else list(a) for a in _arrays(arg)
    )


def _changed(values: dict[str, Arg], copies: dict[str, tuple], names: Iterable[str]) -> list[str]:
    """Those of ``names`` copied so far whose Arg no longer holds its copy's values or ids."""
    return [
        n
        for n in names
        if n in copies and not all(_same(a, b) for a, b in zip(_arrays(values[n]), copies[n]))
    ]


def _same(now: Any, then: Any) -> bool:
    """Whether two arrays (or Nones, or offsets given as lists) hold the same entries, NaN
    equal to NaN."""
    if now is None or then is None:
        return now is then
    if not hasattr(then, "dtype"):  # offsets given as a list
        return list(now) == then
    nan = is_float_dtype(then.dtype)
    return bool(get_array_module(then).array_equal(now, then, equal_nan=nan))


def _what(net: Network, names: list[str]) -> str:
    """``names`` as the messages say them: the output of a layer, or a feed."""
    return _listed(
        f"the output of {net.layers[n].label}" if n in net.layers else f"feed {n!r}" for n in names
    )


def _listed(items: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    said = list(items)
    return " and ".join(said) if len(said) < 3 else f"{', '.join(said[:-1])} and {said[-1]}"
