"""Layers built from projections and operators: Mixed (and the base Concatenate2 shares).

:class:`ProjectionLayer` holds the machinery: it adopts one projection per input (their
parameters become its own, named ``"<layer>.proj<i>.weight"``), starts the output at zero, lets
every projection and operator add into its columns, adds a bias (per column, or per channel for
convolution projections) and applies the activation. Backward follows Paddle's
``MixedLayer::backward``: activation, bias (``inc_update``), each projection's backward (each
fires its own ``inc_update``), then each operator's.

Subclasses only decide which columns each projection writes (:meth:`ProjectionLayer._layout`)
and how a shared bias finds its channels (:meth:`ProjectionLayer._bias_channels`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module, is_float_dtype, resolve_dtype
from distconv.kernels.activation import ActivationFunction
from distconv.kernels.bias import channel_sums, row_sums
from distconv.layers.base import Layer, LayerError, LayerTypeError, named, size_arg, told
from distconv.layers.operator import Operator
from distconv.layers.part import LayerPart, Projection
from distconv.layers.settings import part_settings
from distconv.parameter import Parameter, UpdateCallback


class ProjectionLayer(Layer):
    """Base of layers whose output is a sum of projections (and operators) of their inputs.

    Subclasses take this constructor as it is; they differ only in :meth:`_layout`, in
    :meth:`_bias_channels`, and in the class flags :attr:`projection_optional` and
    :attr:`takes_operators`.

    Args:
        projections: one per input, in input order; None for an input only operators read.
        operators: operators over the inputs (where the layer takes them).
        size: output columns; by default what the parts imply (checked against it if given).
        bias: add a trainable bias.
        shared_bias: one bias per output channel instead of per column; every part must then
            be a convolution.
        act: activation applied last.
        dtype: dtype of the bias (and of the output when no input or parameter fixes it).
        name: layer name.

    Attributes:
        projections: the adopted projections (their parameters are this layer's).
        operators: the adopted operators.
        size: output columns.
        columns: the output columns each projection writes (a slice, or None).
        bias: ``(size,)``, ``(channels,)`` when shared, or None.
    """

    #: whether an input may come without a projection (read by operators only)
    projection_optional = True
    #: whether the layer adds operators into its output
    takes_operators = True

    def __init__(
        self,
        projections: Sequence[Projection | None],
        operators: Sequence[Operator] = (),
        size: int | None = None,
        *,
        bias: bool = False,
        shared_bias: bool = False,
        act: str | ActivationFunction | None = None,
        dtype: Any = np.float32,
        name: str | None = None,
    ) -> None:
        super().__init__(act=act, name=name)
        self.projections = self._listed("projections", projections, "one per input")
        self.operators = self._listed("operators", operators, "size= is a keyword")
        if not self.projections:
            raise self.fail("needs at least one input (one projection, or None, per input)")
        if self.operators and not self.takes_operators:
            raise self.fail("takes no operators (use Mixed)")
        self.requested_size = None if size is None else size_arg(self, "size", size)
        self.num_inputs = len(self.projections)
        self.dtype = resolve_dtype(dtype)
        try:
            self._adopt_parts()
            self._check_inputs_used()
            self.size, self.columns = self._layout()
            self.shared_bias = bool(shared_bias)
            self.bias = self._make_bias() if bias else None
        except BaseException:
            # a layer that was never built holds no part: they stayed attached to it, and a
            # corrected second try was refused as "already attached"
            for part in self.projections + self.operators:
                if isinstance(part, LayerPart) and part.owner is self:
                    part.detach()
            raise

    # -- construction --------------------------------------------------------------------------
    def _listed(self, what: str, parts: Any, hint: str) -> list[Any]:
        """``parts`` as a list, or a LayerTypeError naming this layer: ``Mixed(proj)`` or
        ``Mixed([proj], 8)`` (a size where the operators go) failed on "'int' object is not
        iterable", naming neither the layer nor the argument."""
        if not isinstance(parts, LayerPart | str):
            try:
                return list(parts)
            except TypeError:
                pass
        raise LayerTypeError(
            str(self.fail(f"{what} must be a list ({hint}), got {type(parts).__name__}"))
        )

    def settings(self) -> dict[str, Any]:
        """:meth:`Layer.settings`, and each projection's and operator's type and settings
        (:func:`~distconv.layers.settings.part_settings`): an offset or a scale no parameter
        shows."""
        parts = {
            k: [part_settings(p) for p in getattr(self, k)] for k in ("projections", "operators")
        }
        return super().settings() | parts

    def _adopt_parts(self) -> None:
        """Attach every projection (``proj<i>``) and operator (``op<i>``) to this layer."""
        for i, proj in enumerate(self.projections):
            if proj is None:  # an input only operators read
                if not self.projection_optional:
                    raise self.fail(f"input {i} needs a projection")
                continue
            self._adopt(proj, Projection, f"proj{i}")
        for i, op in enumerate(self.operators):
            self._adopt(op, Operator, f"op{i}")

    def _adopt(self, part: LayerPart, cls: type, key: str) -> None:
        if not isinstance(part, cls):
            raise self.fail(f"{key} must be a {cls.__name__}, got {type(part).__name__}")
        part.attach(self, key)

    def _check_inputs_used(self) -> None:
        n = self.num_inputs
        used = {i for i, p in enumerate(self.projections) if p is not None}
        for op in self.operators:
            bad = [i for i in op.input_indices if i >= n]
            if bad:
                raise self.fail(f"{op.label} reads input(s) {bad}, but the layer has {n} inputs")
            used.update(op.input_indices)
        unused = sorted(set(range(n)) - used)
        if unused:
            raise self.fail(f"input(s) {unused} have no projection and no operator reads them")

    def _layout(self) -> tuple[int, list[slice | None]]:
        """``(size, columns)``: output columns, and the slice each projection writes.

        Called by the constructor once the parts are attached; ``requested_size`` holds the
        ``size`` argument (None when not given).
        """
        raise NotImplementedError

    def _check_size(self, size: int) -> int:
        """``size``, after checking it against a ``size`` argument."""
        want = self.requested_size
        if want is not None and want != size:
            raise self.fail(f"size={want}, but the projections write {size} columns")
        return size

    def _parts(self) -> list[LayerPart]:
        return [p for p in self.projections if p is not None] + self.operators

    def _conv_parts(self) -> list[LayerPart]:
        """Every part, checked to be a convolution (what a shared bias needs)."""
        parts = self._parts()
        for part in parts:
            if not hasattr(part, "out_channels"):
                raise self.fail(
                    f"shared_bias needs convolution projections/operators; {part.label} is not one"
                )
        return parts

    def _bias_channels(self) -> int:
        """Channels of the output, for a shared bias."""
        raise NotImplementedError

    def _make_bias(self) -> Parameter:
        shape = (self._bias_channels(),) if self.shared_bias else (self.size,)
        return self.make_bias("bias", shape, self.dtype)

    def id_range(self, index: int, count: int) -> tuple[int, int] | None:
        """The ids input ``index`` takes: those its projection reads
        (:meth:`~distconv.layers.part.Projection.id_range`, a table's rows); None for an input
        only operators read, or where the layer is wired to another number of inputs than it
        has projections (its forward names the wiring)."""
        proj = self.projections[index] if count == self.num_inputs else None
        return None if proj is None else proj.id_range()

    def rows_read(self, feeds: Sequence[Arg | None]) -> list[tuple[str, Any]]:
        """Each projection's sparse weight: the rows its input selects (see
        :meth:`Layer.rows_read`); any other sparse parameter: every row."""
        reads, asked = [], set()
        for proj, arg in zip(self.projections, feeds):
            w = proj.weight if proj is not None else None
            if w is not None and w.sparse_rows:
                reads.append((w.name, proj.rows_read(arg)))
                asked.add(w.name)
        return reads + [r for r in super().rows_read(feeds) if r[0] not in asked]

    # -- forward / backward --------------------------------------------------------------------
    def _new_output(self, inputs: tuple[Arg, ...]) -> Any:
        rows = [self._batch_size(i, a) for i, a in enumerate(inputs)]
        if len(set(rows)) > 1:
            raise self.fail(f"inputs have different numbers of rows: {rows}")
        arrays = [a.value for a in inputs if a.value is not None]
        arrays += [p.value for p in self.parameters()]
        floats = [a.dtype for a in arrays if is_float_dtype(a.dtype)]
        dtype = np.result_type(*floats) if floats else self.dtype
        return get_array_module(*arrays).zeros((rows[0], self.size), dtype=dtype)

    def _batch_size(self, i: int, arg: Arg) -> int:
        """Input ``i``'s rows: of its value, or of its ids where it has no value (Arg's
        ``batch_size`` raised an IndexError on a 0-d array, a TypeError on neither)."""
        what = "value" if arg.value is not None else "ids"
        a = arg.value if arg.value is not None else arg.ids
        if a is None or a.ndim < 1:
            got = "neither values nor ids" if a is None else f"a 0-d {what}"
            raise self.fail(f"input {i} must hold rows (N, ...), got {got}")
        return int(a.shape[0])

    def _forward(self, *inputs: Arg) -> Any:
        out = self._new_output(inputs)
        part: LayerPart | None = None  # the part running: numpy's errors in it named none
        try:
            for proj, arg, cols in zip(self.projections, inputs, self.columns):
                if proj is not None:
                    part = proj
                    proj.forward(arg, out[:, cols])
            for op in self.operators:
                part = op
                op.forward([inputs[i] for i in op.input_indices], out)
        except LayerError:
            raise
        except ValueError as exc:  # a part of one's own: "Mixed 'm': operands could not ..."
            raise named((part or self).fail(told(exc)), exc) from exc
        if self.bias is not None:
            b = self.bias.value
            if self.shared_bias:
                # a view (out is fresh); not -1, which cannot size an empty batch
                channels = out.reshape(out.shape[0], b.shape[0], self.size // b.shape[0])
                channels += b[:, None]
            else:
                out += b
        return out

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        if self.bias is not None:
            if not self.bias.static:
                c = self.bias.shape[0]
                self.bias.grad += channel_sums(dz, c) if self.shared_bias else row_sums(dz)
            self.bias.inc_update(callback)
        for proj, arg, cols in zip(self.projections, self.inputs, self.columns):
            if proj is not None:
                proj.backward(arg, dz[:, cols], callback)
        for op in self.operators:
            try:
                op.backward([self.inputs[i] for i in op.input_indices], dz)
            except LayerError:
                raise
            except ValueError as exc:  # as Projection.backward: the part named (no callback)
                raise named(op.fail(f"backward: {told(exc)}"), exc) from exc

    def __repr__(self) -> str:
        parts = ", ".join(repr(p) for p in self._parts())
        return f"{self.label}(size={getattr(self, 'size', '?')}, [{parts}], act={self.act})"


class Mixed(ProjectionLayer):
    """Sum of projections and operators of the inputs, plus bias, then activation.

    Paddle's ``MixedLayer``: every projection and operator adds into the whole output.

    Args:
        projections: one per input, in input order; None for an input only operators read.
        operators: operators (e.g. :class:`~distconv.layers.operator.DotMulOperator`) over the
            inputs named by their ``input_indices``.
        size: output columns; by default the common ``out_width`` of the parts.
        bias: add a trainable bias.
        shared_bias: one bias per output channel (convolution parts only).
        act: activation.
        dtype: bias dtype.
        name: layer name.

    Shape:
        - Inputs: whatever each projection / operator reads, all with ``N`` rows.
        - Output: ``(N, size)``; sequence offsets pass through from the first input.

    Attributes:
        bias: ``(size,)``, ``(out_channels,)`` when shared, or None.

    Example:
        >>> emb = Mixed([TableProjection(vocab, 32)])
        >>> ctx = Mixed([ContextProjection(32, context_length=3)], bias=True, act="tanh")
    """

    def _layout(self) -> tuple[int, list[slice | None]]:
        widths = [(p.label, p.out_width) for p in self._parts() if p.out_width is not None]
        size = self.requested_size
        if size is None:
            if not widths:
                raise self.fail("give size: no projection or operator fixes the output width")
            size = widths[0][1]
        for label, w in widths:
            if w != size:
                raise self.fail(f"{label} writes {w} columns, but the layer's size is {size}")
        full = slice(None)
        return size, [None if p is None else full for p in self.projections]

    def _bias_channels(self) -> int:
        channels = {p.out_channels for p in self._conv_parts()}
        if len(channels) > 1:
            raise self.fail(f"shared_bias needs one channel count, parts have {sorted(channels)}")
        return channels.pop()
