"""The Layer base class: forward, backward(callback), parameters, argument checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import is_dataclass
from typing import TYPE_CHECKING, Any

from distconv.arg import Arg
from distconv.backend import ARRAY_KINDS, is_array, is_float_dtype, resolve_dtype, to_device
from distconv.base_init import checks_base_init, refuse_skipped_base_init
from distconv.init import Initializer, initialize
from distconv.kernels.activation import ActivationFunction, get_activation
from distconv.kernels.shape import is_int
from distconv.layers.callback_errors import in_frame, through_callback
from distconv.layers.errors import (  # noqa: F401  (imported from here)
    Fails,
    LayerError,
    LayerResultError,
    LayerTypeError,
    SkippedBaseInit,
    checked,
    checked_shared,
    named,
    told,
)
from distconv.layers.inputs import add_grad, grad_target, values_of  # noqa: F401  (imported from here)
from distconv.layers.modes import forward_only, keeps_for_backward  # noqa: F401  (imported from here)
from distconv.layers.settings import public_settings
from distconv.layers.source_spans import touches_grad_of
from distconv.parameter import Parameter, UpdateCallback, callback_problem

#: what a layer's ``__init__`` must call, and why (:func:`~distconv.base_init.checks_base_init`)
_BASE_CALL = (
    "super().__init__(act=..., name=...): the Layer base holds the name, activation and "
    "parameters (call it before new_param)"
)
#: what ``Layer.__init__`` sets: reading one before it runs is the skipped base call
_BASE_FIELDS = frozenset({"name", "act", "_params", "_owned", "inputs", "output"})


#: the code of an ``__init__`` that :func:`~distconv.base_init.checks_base_init` wrapped
_CHECKED_INIT = checks_base_init(lambda self: None, "", "", "").__code__


def _init_checked(cls: type) -> bool:
    """Whether ``cls``'s ``__init__`` is one of its own, wrapped to tell a base field read
    before the base's ``__init__`` ran (a subclass of a dataclass layer)."""
    return getattr(cls.__init__, "__code__", None) is _CHECKED_INIT


class Layer:
    """A layer: ``forward(*inputs) -> Arg`` and ``backward(callback)``.

    Subclasses implement :meth:`_forward` (inputs to pre-activation array) and :meth:`_backward`
    (gradient of the pre-activation to gradients of parameters and inputs). The base applies the
    activation on the way forward and undoes it first on the way back, as every Paddle layer does
    with ``backwardActivation()``. Gradients are added (``+=``) into ``Arg.grad`` and
    ``Parameter.grad``, so running backward twice doubles them.

    A subclass's ``__init__`` calls ``super().__init__(act=..., name=...)`` before it makes
    parameters (else ``TypeError``); its backward calls ``param.inc_update(callback)`` on each
    of its parameters the moment that parameter's gradient is complete. A static (frozen)
    parameter has no gradient (``grad`` is None): add nothing into it (``if not p.static:
    p.grad += ...``); its ``inc_update`` does nothing.

    Args:
        act: activation name (``"relu"``, ``"sigmoid"``, ``"tanh"``, ``"softmax"``,
            ``"linear"``), an activation object, or None for linear.
        name: the layer's name in error messages and parameter names; the network sets it.

    Attributes:
        inputs: the Args of the last forward.
        output: the Arg of the last forward.
    """

    #: whether ``_forward`` returns a fresh array nobody else holds, so the activation may
    #: overwrite it instead of allocating the output anew
    owns_preactivation: bool = False
    #: how many inputs ``forward`` takes: an int, or ``(min, max)`` with ``max=None`` for any.
    num_inputs: int | tuple[int, int | None] = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in vars(cls):  # named in the error: a subclass calling it is not to blame
            cls.__init__ = checks_base_init(  # type: ignore[method-assign]
                cls.__init__, cls.__name__, "_params", _BASE_CALL, _BASE_FIELDS
            )

    def __init__(self, *, act: str | ActivationFunction | None = None, name: str | None = None):
        if vars(self).get("_params"):  # a second run dropped those made since: never trained
            raise TypeError(
                f"{self.label}: a second Layer.__init__ drops {list(self._params)}; call it once, "
                "before new_param, and pass act= or name= on through the parent's __init__ "
                "(super().__init__(..., act=...)) instead of calling it again to change them"
            )
        self.name = name or type(self).__name__
        self.act = checked(self, get_activation, act)  # the error names the layer
        self._params: dict[str, Parameter] = {}
        self._owned: set[str] = set()
        self.inputs: tuple[Arg, ...] = ()
        self.output: Arg | None = None

    # at run time only: a checker that saw ``__getattr__ -> Any`` took every misspelled
    # attribute of every layer (``fc.wieght``) as Any, so a typo passed ``mypy --strict``
    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            # run only where the usual lookup failed, so no cost on the healthy path: a dataclass
            # layer's __init__ never ran the base's, which a Network's add says; run by hand, it
            # failed far away, "'Widths' object has no attribute 'name'"
            # (not while an __init__ of one's own runs, checked: it tells the read as any layer's)
            if name in _BASE_FIELDS and is_dataclass(self) and not _init_checked(type(self)):
                try:  # an AttributeError too: hasattr(layer, "name") is False, as for any
                    refuse_skipped_base_init(self, "_params", _BASE_CALL)
                except TypeError as exc:
                    raise SkippedBaseInit(str(exc), name=name, obj=self) from None
            return object.__getattribute__(self, name)  # a property's own AttributeError, again

    # -- parameters ---------------------------------------------------------------------------
    def add_param(self, key: str, param: Parameter) -> Parameter:
        """Register ``param`` as this layer's ``key`` (the Network counts its users per pass)."""
        if key in self._params:
            raise self.fail(f"parameter {key!r} registered twice")
        self._params[key] = param
        return param

    def new_param(self, key: str, value: Any, *, static: bool = False) -> Parameter:
        """Create and register a parameter named ``"<layer name>.<key>"``, owned by this layer,
        its value on the current device (a layer of one's own passing ``np.ones(...)`` left it
        on the host under ``--device gpu``, where the first product with a device array fails
        inside the layer; anything but an array is the Parameter's to refuse)."""
        if is_array(value):
            value = to_device(value)
        param = self.add_param(key, Parameter(f"{self.name}.{key}", value, static=static))
        self._owned.add(key)
        return param

    def make_weight(
        self,
        key: str,
        shape: tuple[int, ...],
        *,
        init: str | Initializer,
        fan_in: int,
        fan_out: int,
        dtype: Any,
        shared: Parameter | None = None,
    ) -> Parameter:
        """A new initialised weight under ``key``, or ``shared`` after checking its shape."""
        shape = tuple(shape)
        if shared is None:
            self._check_float(key, dtype)
            try:
                value = initialize(init, shape, fan_in, fan_out, dtype)
            except (ValueError, TypeError) as exc:
                # an unknown init= named neither the layer nor the weight, nor did a function of
                # the wrong signature or one returning no array (a TypeError from calling it);
                # a function's own error keeps its traceback: "scale < 0" alone hid the line of
                # the caller's initialiser it came from
                error = self.fail(f"{key}: {told(exc)}")
                if isinstance(exc, TypeError):  # a TypeError still, for callers that catch one
                    error = LayerTypeError(str(error))
                else:  # an initialiser's LinAlgError (a cholesky) still caught by its class
                    error = named(error, exc)
                raise error from (exc if callable(init) else None)
            return self.new_param(key, value)
        return self.add_param(key, checked_shared(self, key, shared, shape))

    def make_bias(self, key: str, shape: tuple[int, ...], dtype: Any) -> Parameter:
        """A new bias under ``key``, zeros of ``shape``."""
        self._check_float(key, dtype)
        return self.new_param(key, initialize("zero", tuple(shape), 1, 1, dtype))

    def _check_float(self, key: str, dtype: Any) -> None:
        """Refuse a parameter ``dtype`` that is no float type, before anything is drawn: integer
        weights were drawn to mostly zeros and failed in backward, adding float gradients."""
        try:  # numpy's "data type 'float33' not understood" named no layer
            resolved = resolve_dtype(dtype)
        except TypeError as exc:
            raise TypeError(f"{self.label}: {key}: {exc}") from None
        if not is_float_dtype(resolved):
            raise self.fail(f"{key}: dtype={resolved} is not a float type (float32, bfloat16 ...)")

    def set_name(self, name: str) -> None:
        """Rename the layer and the parameters it owns (shared ones passed in keep theirs)."""
        refuse_skipped_base_init(self, "_params", _BASE_CALL)  # a dataclass's __init__
        self.name = name
        for key in self._owned:
            self._params[key].name = f"{name}.{key}"

    def settings(self) -> dict[str, Any]:
        """What this layer computes besides its parameters' shapes, as JSON-able values: its
        activation and each frozen dataclass it holds (a convolution's spec, a pool's
        geometry). Ranks of one job must agree on it (:meth:`~distconv.network.Network.structure`);
        a layer with other settings of its own adds them."""
        return {"act": type(self.act).__name__} | public_settings(self, plain=False)

    def parameters(self) -> list[Parameter]:
        """This layer's parameters (sub-objects such as projections included), in a stable order."""
        return list(self._params.values())

    def rows_read(self, feeds: Sequence[Arg | None]) -> list[tuple[str, Any]]:
        """Which rows of its ``sparse_rows`` parameters a forward on these inputs reads.

        Asked before forward (a parameter server pulls those rows first). This default reads
        every row; tables and selective FCs narrow it to the rows their ids select.

        Args:
            feeds: input ``i``'s Arg when the network is fed it, None when a layer computes it.

        Returns:
            ``(parameter name, row ids)`` pairs; ids in any order, repeats allowed.
        """
        return [(p.name, p.all_rows()) for p in self.parameters() if p.sparse_rows]

    def id_range(self, index: int, count: int) -> tuple[int, int] | None:
        """The ids input ``index`` (of the ``count`` it is wired to) must hold, as ``(low,
        high)``: ``low <= id < high``; None (the default) where it reads no ids.

        A fit checks every row of a feed wired straight to such an input before its first
        step (:func:`~distconv.data_checks.refuse_ids_out_of_range`); the layer's own check of
        each batch found a bad row only at the step that drew it, naming neither the feed nor
        the row. A layer that reads ids (a table, a choice among inputs) overrides it.
        """
        return None

    # -- forward / backward -------------------------------------------------------------------
    def __call__(self, *inputs: Arg) -> Arg:
        return self.forward(*inputs)

    def forward(self, *inputs: Arg) -> Arg:
        """Compute the output from ``inputs``; keeps both for backward.

        Raises:
            LayerError: naming this layer, for a ValueError from :meth:`_forward` or the
                activation's forward (a shape numpy cannot broadcast, in one of one's own),
                which it chains; of that error's class too, where it is a subclass
                (``except np.linalg.LinAlgError`` catches it, :func:`named`).
            LayerResultError: :meth:`_forward` returned no array (an Arg, a list).
        """
        self.output = None  # a forward that fails leaves nothing to run backward on
        self.check_num_inputs(inputs)
        self.inputs = inputs
        try:  # the activation's too: chained, as backward's, and no call per step
            z = self._forward(*inputs)
            if not is_array(z):  # an Arg or a list failed in the next layer: "no 'ndim'"
                raise LayerResultError(
                    f"{self.label}: _forward returned {type(z).__name__}, not an array "
                    f"({ARRAY_KINDS}): it returns the output's values (an Arg's .value), not an Arg"
                )
            y = self.act.forward(z, inplace=self.owns_preactivation)
        except LayerError:
            raise
        except ValueError as exc:  # a layer of one's own: numpy's broadcast error named none
            raise named(self.fail(told(exc)), exc) from exc
        self.output = self.make_output(y, inputs)
        return self.output

    def backward(self, callback: UpdateCallback) -> None:
        """Add this layer's gradients into its inputs and parameters; fire ``inc_update``.

        Raises:
            LayerError: no forward ran, or ``callback`` is not callable (before any gradient).
            LayerTypeError: ``_backward`` added into a static parameter's gradient (None).
            LayerError: naming this layer, for a ValueError from :meth:`_backward` (a gradient
                numpy cannot broadcast into), which it chains, of its class too as forward's;
                not for a callback's own.
        """
        if self.output is None:
            raise self.fail("backward called before forward")
        problem = callback_problem(callback)  # a layer run by hand: a bias's gradient was in
        if problem:
            raise self.fail(problem)
        try:  # an activation's error names the layer; a try costs no call per step
            dz = self.backward_activation()
        except LayerError:
            raise
        except ValueError as exc:  # chained, as a _backward's: checked() dropped it
            raise named(self.fail(told(exc)), exc) from exc
        callback = in_frame(callback)  # a C callback's errors told from the layer's own
        try:
            self._backward(dz, callback)
        except TypeError as exc:
            try:  # read deep in the stack, the reading may run out of it: the error as it is
                error = self._frozen_error(exc, callback)
            except RecursionError:
                error = None
            if error is None:
                raise
            raise error from exc
        except ValueError as exc:  # as forward's: "non-broadcastable output operand" named none
            if isinstance(exc, LayerError) or through_callback(exc, callback):
                raise
            raise named(self.fail(f"backward: {told(exc)}"), exc) from exc

    def _frozen_error(self, exc: TypeError, callback: UpdateCallback) -> LayerError | None:
        """``exc`` of a ``_backward``, "unsupported operand type(s) for +=: 'NoneType' and
        'float'", naming the layer and the frozen parameter whose absent gradient it added
        into; None where it is no frozen weight's: a callback's (the sync's, an optimizer's),
        or a line's that touched no frozen gradient (a cache of the layer's own left None),
        or where no line says (exec'd code): the layer's error is not guessed at."""
        # one registered under two keys (a weight used twice, each use its own) is one
        static = list({id(p): p for p in self.parameters() if p.grad is None}.values())
        frozen = [p.name for p in static]
        if not frozen or "NoneType" not in told(exc) or isinstance(exc, LayerError):
            return None
        if through_callback(exc, callback) or touches_grad_of(exc, static) is False:
            return None
        return LayerTypeError(
            f"{self.label}: backward failed ({told(exc)}); static parameter(s) {frozen} have no "
            "gradient (grad is None): skip adding into one (if not p.static: p.grad += ...)"
        )

    def backward_activation(self) -> Any:
        """The gradient of the pre-activation, from the output's gradient: an integer one (set
        by hand) in the output's type, where a convolution truncated its products to integers."""
        out, g = self.output, self.output.grad
        if not is_float_dtype(getattr(g, "dtype", out.value.dtype)):
            g = g.astype(out.value.dtype)
        return self.act.backward(out.value, g)

    def make_output(self, y: Any, inputs: tuple[Arg, ...]) -> Arg:
        """Wrap the output array; sequence offsets pass through from the first input."""
        seq = inputs[0].seq_starts if inputs else None
        return Arg(y, seq_starts=seq)

    # any signature, to a checker: each layer names its own inputs (``_forward(self, x)``),
    # which ``*inputs: Arg`` refused as an incompatible override
    def _forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """The pre-activation array (numpy or cupy) from ``inputs``; a subclass writes it."""
        raise NotImplementedError(f"{self.label} has no _forward(*inputs) of its own")

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        """Add the gradients from ``dz`` (of the pre-activation) into the inputs and the
        parameters, firing each parameter's ``inc_update(callback)``; a subclass writes it."""
        raise NotImplementedError(f"{self.label} has no _backward(dz, callback) of its own")

    # -- argument checks ----------------------------------------------------------------------
    def check_num_inputs(self, inputs: tuple[Arg, ...]) -> None:
        lo, hi = (
            (self.num_inputs, self.num_inputs)
            if isinstance(self.num_inputs, int)
            else self.num_inputs
        )
        n = len(inputs)
        if n < lo or (hi is not None and n > hi):
            want = str(lo) if lo == hi else f"{lo} to {hi if hi is not None else 'any number'}"
            raise self.fail(f"expected {want} input(s), got {n}")
        for i, a in enumerate(inputs):
            if not isinstance(a, Arg):
                raise self.fail(f"input {i} must be an Arg, got {type(a).__name__}")

    def fail(self, message: str) -> LayerError:
        """A LayerError whose message starts with this layer's type and name."""
        return LayerError(f"{self.label}: {message}")

    @property
    def label(self) -> str:
        """Type and name, as error messages show the layer: ``Conv2D 'conv1'``."""
        cls = type(self).__name__
        return cls if self.name == cls else f"{cls} '{self.name}'"

    def __repr__(self) -> str:
        return self.label


def size_arg(owner: Fails, name: str, value: Any) -> int:
    """``value`` as a size (an int >= 1), or ``owner.fail`` naming ``name``: a bool or a float
    is none (``True`` would be 1)."""
    if not is_int(value):
        raise owner.fail(f"{name}={value!r} must be an int")
    if value < 1:
        raise owner.fail(f"{name}={value} must be >= 1")
    return int(value)
