"""Network: a DAG of named layers, forward in topological order, backward in reverse.

The Network alone counts each parameter's users (the layers of this network that add into its
gradient), so a parameter shared by k layers fires its callback once per pass, after the k-th.
After every backward it checks that each trainable parameter fired exactly once, and that the
order matches the first pass's (:attr:`Network.firing_order`), which the allreduce lays its
buckets out by.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from distconv import network_reads
from distconv.arg import Arg
from distconv.fired_writes import promises_untouched
from distconv.firing import Firing, fired_problem
from distconv.kernels.parallel import one_blas_thread
from distconv.layers.base import Layer
from distconv.layers.loss import SoftmaxCrossEntropy, loss_seed
from distconv.loss_scale_check import warn_unscaled_mean
from distconv.network_checks import AddChecks
from distconv.network_feeds import arg_problem, integer_input_problem, not_finite_problem
from distconv.network_reads import feeds_read, layers_needed, not_run_problem, rows_needed
from distconv.network_summary import network_summary
from distconv.parameter import Parameter, UpdateCallback, callback_problem, name_clash

_LayerT = TypeVar("_LayerT", bound=Layer)  # add returns its layer's own class (fc.weight)


class NetworkError(ValueError):
    """A malformed network or a bad feed; the message names the layer or input."""


class Network:
    """Named layers wired by name; names not produced by a layer are data inputs (feeds).

    Args:
        check_finite: check every float feed for NaN and infinity at each forward. A trainer
            whose data set was checked once when loaded turns it off: on a GPU the check is a
            host sync per step.

    Attributes:
        firing_order: names of the trainable parameters in the order the first backward pass
            fired their callbacks; None before it. Later passes must fire in the same order.

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
        self.firing_order: list[str] | None = None
        self._partial = False  # the last forward ran only the layers its ``outputs`` need
        self._order: tuple[list[str], dict[str, tuple[str, ...]], set[str]] | None = None
        self._checks = AddChecks(self.layers, self.wiring)
        self._users: Counter[int] = Counter()  # id of a parameter -> the layers that hold it

    def add(self, name: str, layer: _LayerT, inputs: str | Iterable[str]) -> _LayerT:
        """Add ``layer`` under ``name``, reading the outputs (or feeds) named in ``inputs``;
        returns ``layer``, typed as given (``net[name]`` is only a :class:`Layer` to a checker).

        Raises:
            NetworkError: the name is taken or not a string, ``layer`` is not a Layer or is
                already in the network under another name, or ``inputs`` are not names.
        """
        if not isinstance(name, str) or not name:
            raise NetworkError(f"a layer name must be a non-empty string, got {name!r}")
        if not isinstance(inputs, (str, Iterable)):
            raise NetworkError(f"add({name!r}, ...): inputs must be names, got {inputs!r}")
        if not isinstance(layer, Layer):
            raise NetworkError(f"add({name!r}, ...): expected a Layer, got {type(layer).__name__}")
        self._checks.follow(self.layers, self.wiring)  # a script may have rebound either
        if name in self.layers:
            raise NetworkError(f"layer name {name!r} is used twice")
        if (other := self._checks.name_of(layer)) is not None:
            raise NetworkError(
                f"add({name!r}, ...): this {type(layer).__name__} object is already in the "
                f"network as {other!r}; a layer keeps one call's inputs for backward, so it "
                f"cannot run twice in a pass. To share weights, build a second layer and pass it "
                f"the first one's Parameter (weight=first.weight, first = net.add({other!r}, ...))"
            )
        names = (inputs,) if isinstance(inputs, str) else tuple(inputs or ())
        if not names or not all(isinstance(n, str) and n for n in names):
            raise NetworkError(f"add({name!r}, ...): inputs must be names, got {inputs!r}")
        layer.set_name(name)
        if problem := self._checks.problem(name, layer, names):
            raise NetworkError(f"add({name!r}, ...): {problem}")
        self.layers[name] = layer
        self.wiring[name] = names
        self._checks.added(name, layer, names)
        self._order = None
        self.firing_order = None  # a new layer, a new order
        self._count_new_users(layer)
        return layer

    def __getitem__(self, name: str) -> Layer:
        return self.layers[name]

    def __repr__(self) -> str:
        return network_summary(self)  # its layers, kinds and sizes, a line each

    @property
    def feed_names(self) -> list[str]:
        """Inputs that no layer produces: what :meth:`forward` must be fed."""
        seen = {n for ins in self.wiring.values() for n in ins}
        return sorted(n for n in seen if n not in self.layers)

    def order(self) -> list[str]:
        """Layer names in topological order; read again where a name or the wiring changed."""
        if self._order is None or self._order[1:] != (self.wiring, self.layers.keys()):
            wiring = {name: tuple(inputs) for name, inputs in self.wiring.items()}  # a list's too
            self._order = self._topological_order(), wiring, set(self.layers)
        return self._order[0]

    def softmax_inputs(self, loss: str) -> tuple[str, str] | None:
        """``(predictions, labels)`` of ``loss`` when it is a softmax cross-entropy, else None.

        What the trainer counts right answers with when asked for accuracy ``"auto"``.
        """
        wiring = self.wiring[loss]
        if isinstance(self.layers[loss], SoftmaxCrossEntropy) and len(wiring) == 2:
            return wiring[0], wiring[1]
        return None

    def _topological_order(self) -> list[str]:
        """Depth-first, inputs before readers, roots in insertion order (deterministic).

        With a stack of its own rather than Python's: a chain of about 1000 layers added
        readers first (a model built from its loss down) raised RecursionError.
        """
        order: list[str] = []
        done: set[str] = set()
        for root in (name for name in self.layers if name not in done):
            path, inputs = [root], [iter(self.wiring[root])]  # the current path, its inputs
            on_path = {root}
            while path:
                dep = next(inputs[-1], None)
                if dep is None:  # every input of path[-1] is ordered: order it
                    inputs.pop()
                    on_path.discard(path[-1])
                    done.add(path[-1])
                    order.append(path.pop())
                elif dep in self.layers and dep not in done:
                    if dep in on_path:
                        raise NetworkError(f"cycle through layers {' -> '.join(path + [dep])}")
                    path.append(dep)
                    on_path.add(dep)
                    inputs.append(iter(self.wiring[dep]))
        return order

    def parameters(self) -> list[Parameter]:
        """Every parameter once, in layer order; names must be unique."""
        params: dict[int, Parameter] = {}
        holders: dict[str, str] = {}  # parameter name -> the first layer that holds it
        for lname in self.order():
            for p in self.layers[lname].parameters():
                if id(p) in params:
                    continue
                if p.name in holders:  # named no layer: which two, of a hundred?
                    raise NetworkError(name_clash(p.name, holders[p.name], lname))
                params[id(p)], holders[p.name] = p, lname
        return list(params.values())

    def structure(self) -> dict[str, dict[str, Any]]:
        """Each layer's type, inputs and :meth:`~distconv.layers.base.Layer.settings`, by name:
        with the parameters' names, shapes and dtypes, what makes two ranks' models one model
        (the Trainer hands it to the sync's start-up check)."""
        return {
            name: {"type": type(layer).__name__, "inputs": list(self.wiring[name])}
            | layer.settings()
            for name, layer in self.layers.items()
        }

    def zero_grad(self) -> None:
        """Clear every parameter's gradient."""
        for p in self.parameters():
            p.zero_grad()

    def _count_users(self) -> None:
        """Tell each parameter how many of this network's layers will add into it per pass.

        Only the network counts: a layer built with a parameter but left out of the network
        must not hold its callback back. Counting again at every backward also covers a
        parameter shared with another network, and starts the pass with no pending counts,
        whatever an interrupted pass left.
        """
        users: Counter[int] = Counter()
        params: dict[int, Parameter] = {}
        for layer in self.layers.values():
            for p in layer.parameters():
                users[id(p)] += 1
                params[id(p)] = p
        for key, p in params.items():
            p.shared_count = users[key]
            p.reset_pending()
        self._users = users

    def _count_new_users(self, layer: Layer) -> None:
        """:meth:`_count_users` for a layer just added, counting only its parameters: counting
        every layer's at every add made building a network grow with the square of its size."""
        for p in layer.parameters():
            self._users[id(p)] += 1
            p.shared_count = self._users[id(p)]
            p.reset_pending()

    def forward(
        self, feeds: Mapping[str, Arg | Any], outputs: str | Iterable[str] | None = None
    ) -> dict[str, Arg]:
        """Run every layer, or only those ``outputs`` (layer names) need, which then need only
        the feeds those read (a prediction: no labels); returns the outputs computed by name,
        the feeds included. A backward needs a forward of every layer: after one with
        ``outputs`` it is refused.

        Raises:
            NetworkError: a feed needed is missing, or holds NaN or infinity; ``outputs`` names
                no layer or feed.
        """
        return self.forward_watched(feeds, None, outputs)

    def forward_watched(
        self,
        feeds: Mapping[str, Arg | Any],
        after: Callable[[str, dict[str, Arg]], bool] | None,
        outputs: str | Iterable[str] | None = None,
    ) -> dict[str, Arg]:
        """:meth:`forward` (its errors too), calling ``after(name, outputs)``, the outputs so
        far, after each layer's: the pass training runs, for a probe between layers
        (:mod:`distconv.written_values`). Where ``after`` returns True it stops there, returning
        the outputs so far and leaving :attr:`outputs` empty, as a forward that raised does."""
        self.outputs = {}
        if not isinstance(feeds, Mapping):
            raise NetworkError(
                f"forward expects a mapping from input names to Args or arrays, got "
                f"{type(feeds).__name__}"
            )
        self._partial = outputs is not None  # a backward needs every layer's forward
        if outputs is not None:  # a string is one name, as add's inputs; an iterable read once
            outputs = [outputs] if isinstance(outputs, str) else list(outputs)
        names = self.order() if outputs is None else layers_needed(self, outputs)
        fed = self.feed_names if outputs is None else feeds_read(self, names, outputs)
        computed = {name: self._check_feed(name, feeds) for name in fed}
        with one_blas_thread():  # the kernels' threads are the step's parallelism
            for name in names:
                args = [computed[i] for i in self.wiring[name]]
                try:
                    computed[name] = self.layers[name].forward(*args)
                except TypeError as exc:  # numpy's casting errors; rare, so checked only here
                    try:  # read deep in the stack, it may run out of it: the error as it is
                        self._raise_for_integer_input(name, args, exc)
                    except RecursionError:
                        pass
                    raise
                if after is not None and after(name, computed):
                    return computed
        self.outputs = computed
        return computed

    def _raise_for_integer_input(self, name: str, args: list[Arg], exc: TypeError) -> None:
        """A casting error (a layer's, numpy's) of integer values as a NetworkError; no other."""
        problem = integer_input_problem(self.layers[name].label, self.wiring[name], args, exc)
        if problem is not None:
            raise NetworkError(problem) from exc

    def rows_needed(self, feeds: Mapping[str, Arg | Any]) -> dict[str, Any]:
        """The rows a forward on ``feeds`` reads of each trainable ``sparse_rows`` parameter.

        Runs no forward: each layer holding such a parameter answers from the inputs it is fed
        (:meth:`Layer.rows_read`): a table the ids, a selective FC the selected columns, any
        other reader every row. A parameter shared by several layers gets the union.

        Returns:
            parameter name -> distinct row ids, sorted; empty when nothing is sparse.

        Raises:
            NetworkError: a feed is missing, or a sparse layer's ids are computed by another
                layer (then its rows cannot be known before forward).
        """
        return rows_needed(self, feeds)

    def _feed_arg(self, name: str, feeds: Mapping[str, Arg | Any]) -> Arg:
        """Feed ``name`` as an Arg (an array is wrapped), checked for presence and type."""
        if name not in feeds:
            raise NetworkError(f"input {name!r} was not fed (feeds: {sorted(feeds)})")
        arg = feeds[name]
        if (problem := arg_problem(name, arg)) is not None:
            raise NetworkError(problem)
        return arg if isinstance(arg, Arg) else Arg(arg, needs_grad=False)

    def _check_feed(self, name: str, feeds: Mapping[str, Arg | Any]) -> Arg:
        """:meth:`_feed_arg`, and float values checked finite when ``check_finite``."""
        arg = self._feed_arg(name, feeds)
        if self.check_finite and (problem := not_finite_problem(name, arg.value)) is not None:
            raise NetworkError(problem)
        return arg

    def backward(
        self, callback: UpdateCallback, loss: str | None = None, *, loss_scale: float = 1.0
    ) -> None:
        """Backward through every layer in reverse order, with one callback for the pass.

        Args:
            callback: called by each parameter once its gradient is complete.
            loss: the layer whose output is the scalar loss; its gradient is seeded with 1.
                Defaults to the one layer that no other layer reads.
            loss_scale: the loss gradient's seed. The Trainer passes the batch's example count,
                so a mean loss yields gradient sums that a sync strategy can add across ranks.
                With a sync as ``callback``, pass the rows the loss averages over (the pass's
                examples, ``backward(sync, loss_scale=n)``): the sync divides by the step's
                count, and the default of 1 trains a mean loss at 1/n of the learning rate.
                That mistake is warned of once per network
                (:func:`distconv.loss_scale_check.warn_unscaled_mean` says when).

        Raises:
            NetworkError: ``callback`` is not callable, no forward of every layer ran since
                the last layer was added (one with ``outputs`` runs some), ``loss`` is no
                layer (or is not given and several layers are read by none), or a parameter
                did not fire exactly once.
        """
        seeded = self.backward_watched(callback, None, loss, loss_scale=loss_scale)
        warn_unscaled_mean(self, callback, self.layers[seeded], loss_scale)

    def backward_watched(
        self,
        callback: UpdateCallback,
        after: Callable[[str], bool] | None,
        loss: str | None = None,
        *,
        loss_scale: float = 1.0,
    ) -> str:
        """:meth:`backward` (its errors too), calling ``after(name)`` after each layer's: the
        pass training runs, prepared as it prepares it, for a probe between layers
        (:mod:`distconv.written_values`). Where ``after`` returns True it stops there, the
        parameters fired so far not checked nor their order recorded. Returns the layer seeded
        (``loss``, or the one output when it is None)."""
        problem = callback_problem(callback)  # before any layer adds a gradient
        if problem:
            raise NetworkError(problem)
        order = self.order()
        if not self.outputs:
            raise NetworkError("backward called before forward")
        if late := [name for name in order if name not in self.outputs]:
            raise NetworkError(not_run_problem(late, self._partial))
        if loss is None:
            loss = self._only_output()
        elif loss not in self.layers:
            raise NetworkError(f"backward(loss={loss!r}): no such layer (layers: {order})")
        self.parameters()  # two of one name, refused before any callback fires
        self._count_users()
        for arg in self.outputs.values():
            arg.grad = None  # from zero each pass: a second adds one pass's worth into params
        out = self.outputs[loss]
        out.grad = loss_seed(out.value, loss_scale)  # float32 for a 16-bit loss
        # the first pass guards the gradients fired against a layer's later writes
        guard = self.firing_order is None and promises_untouched(callback)
        firing = Firing(callback, NetworkError, guard)
        with one_blas_thread():
            for name in reversed(order):
                firing.run(name, self.layers[name])
                if after is not None and after(name):
                    return loss
        self._check_fired(firing.fired)
        return loss

    def _only_output(self) -> str:
        """The one layer no other layer reads: the loss when none is named. The last layer in
        topological order was taken, and a layer added after the loss that reads only the data
        (a probe, an evaluation head) was seeded as the loss: the loss's own layers got no
        gradient, with no error."""
        outputs = network_reads.unread_layers(self)
        if len(outputs) != 1:
            raise NetworkError(
                f"backward(): layers {outputs} are read by no other layer; name the loss "
                f"(backward(callback, loss=...))"
            )
        return outputs[0]

    def _check_fired(self, fired: list[Parameter]) -> None:
        """Every trainable parameter fired exactly once, in the first pass's order
        (:func:`~distconv.firing.fired_problem`); the first pass records its order."""
        trainable = [p for p in self.parameters() if not p.static]
        problem = fired_problem(fired, trainable, self.firing_order)
        if problem is not None:
            raise NetworkError(problem)
        if self.firing_order is None:
            self.firing_order = [p.name for p in fired]

    def reset_firing_order(self) -> None:
        """Forget the recorded order; the next backward records it afresh."""
        self.firing_order = None
