"""Network: a DAG of named layers, forward in topological order, backward in reverse."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from distconv.arg import Arg
from distconv.backend import get_array_module
from distconv.layers.base import Layer
from distconv.parameter import Parameter, UpdateCallback


class NetworkError(ValueError):
    """A malformed network or a bad feed; the message names the layer or input."""


class Network:
    """Named layers wired by name; names not produced by a layer are data inputs (feeds).

    Args:
        check_finite: check every float feed for NaN and infinity at each forward. A trainer
            whose data set was checked once when loaded turns it off: on a GPU the check is a
            host sync per step.

    Example:
        >>> net = Network()
        >>> net.add("fc", FullyConnected(4, 3, act="relu"), inputs="x")
        >>> net.add("loss", SoftmaxCrossEntropy(), inputs=["fc", "label"])
        >>> out = net.forward({"x": Arg(x, needs_grad=False), "label": Arg(ids=y)})
        >>> net.backward(callback)            # seeds d(loss) = 1, walks the layers in reverse
    """

    def __init__(self, check_finite: bool = True) -> None:
        self.check_finite = check_finite
        self.layers: dict[str, Layer] = {}
        self.wiring: dict[str, tuple[str, ...]] = {}
        self.outputs: dict[str, Arg] = {}
        self._order: list[str] | None = None

    def add(self, name: str, layer: Layer, inputs: str | Iterable[str]) -> Layer:
        """Add ``layer`` under ``name``, reading the outputs (or feeds) named in ``inputs``."""
        if name in self.layers:
            raise NetworkError(f"layer name {name!r} is used twice")
        names = (inputs,) if isinstance(inputs, str) else tuple(inputs)
        layer.set_name(name)
        self.layers[name] = layer
        self.wiring[name] = names
        self._order = None
        return layer

    def __getitem__(self, name: str) -> Layer:
        return self.layers[name]

    @property
    def feed_names(self) -> list[str]:
        """Inputs that no layer produces: what :meth:`forward` must be fed."""
        seen = {n for ins in self.wiring.values() for n in ins}
        return sorted(n for n in seen if n not in self.layers)

    def order(self) -> list[str]:
        """Layer names in topological order (inputs before the layers that read them)."""
        if self._order is None:
            self._order = self._topological_order()
        return self._order

    def _topological_order(self) -> list[str]:
        order: list[str] = []
        state: dict[str, int] = {}  # 1 = on the current path, 2 = done

        def visit(name: str, path: tuple[str, ...]) -> None:
            if state.get(name) == 2 or name not in self.layers:
                return
            if state.get(name) == 1:
                raise NetworkError(f"cycle through layers {' -> '.join(path + (name,))}")
            state[name] = 1
            for dep in self.wiring[name]:
                visit(dep, path + (name,))
            state[name] = 2
            order.append(name)

        for name in self.layers:  # insertion order keeps the result deterministic
            visit(name, ())
        return order

    def parameters(self) -> list[Parameter]:
        """Every parameter once, in layer order; names must be unique."""
        params: dict[int, Parameter] = {}
        names: dict[str, Parameter] = {}
        for lname in self.order():
            for p in self.layers[lname].parameters():
                if id(p) in params:
                    continue
                if p.name in names:
                    raise NetworkError(f"two different parameters are named {p.name!r}")
                params[id(p)] = names[p.name] = p
        return list(params.values())

    def zero_grad(self) -> None:
        """Clear every parameter's gradient."""
        for p in self.parameters():
            p.zero_grad()

    def _count_users(self) -> None:
        """Tell each parameter how many of this network's layers will add into it per pass.

        ``Parameter.shared_count`` counts every layer ever built with the parameter; a layer
        built but left out of this network would hold its callback back forever. A pass also
        starts with no pending counts, whatever an interrupted pass left.
        """
        users: dict[int, int] = {}
        for name in self.order():
            for p in self.layers[name].parameters():
                users[id(p)] = users.get(id(p), 0) + 1
        for p in self.parameters():
            p.shared_count = users[id(p)]
            p.reset_pending()

    def forward(self, feeds: Mapping[str, Arg | Any]) -> dict[str, Arg]:
        """Run every layer; returns all outputs by name (the feeds included).

        Raises:
            NetworkError: a feed is missing, or holds NaN or infinity.
        """
        self.outputs = {}
        outputs = {name: self._check_feed(name, feeds) for name in self.feed_names}
        for name in self.order():
            args = [outputs[i] for i in self.wiring[name]]
            outputs[name] = self.layers[name].forward(*args)
        self.outputs = outputs
        return outputs

    def _check_feed(self, name: str, feeds: Mapping[str, Arg | Any]) -> Arg:
        if name not in feeds:
            raise NetworkError(f"input {name!r} was not fed (feeds: {sorted(feeds)})")
        arg = feeds[name]
        if not isinstance(arg, Arg):
            arg = Arg(arg, needs_grad=False)
        v = arg.value
        if self.check_finite and v is not None and v.dtype.kind == "f":
            xp = get_array_module(v)
            if not bool(xp.isfinite(v).all()):
                bad = int((~xp.isfinite(v)).sum())
                raise NetworkError(
                    f"input {name!r} of shape {tuple(v.shape)} holds {bad} NaN or infinite values"
                )
        return arg

    def backward(
        self, callback: UpdateCallback, loss: str | None = None, *, loss_scale: float = 1.0
    ) -> None:
        """Backward through every layer in reverse order, with one callback for the pass.

        Args:
            callback: called by each parameter once its gradient is complete.
            loss: the layer whose output is the scalar loss; its gradient is seeded with 1.
                Defaults to the last layer in topological order.
            loss_scale: the loss gradient's seed. The Trainer passes the batch's example count,
                so a mean loss yields gradient sums that a sync strategy can add across ranks.
        """
        order = self.order()
        if not self.outputs:
            raise NetworkError("backward called before forward")
        self._count_users()
        loss = loss or order[-1]
        # Gradients of intermediate outputs start from zero each pass, so a second backward
        # adds exactly one more pass's worth into the parameters (they accumulate, Args don't).
        for arg in self.outputs.values():
            arg.grad = None
        out = self.outputs[loss]
        out.grad = get_array_module(out.value).full_like(out.value, loss_scale)
        for name in reversed(order):
            self.layers[name].backward(callback)
