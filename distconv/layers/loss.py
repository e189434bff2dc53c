"""Losses as layers: softmax cross-entropy and mean squared error.

A loss layer's output is a 0-d array (the mean over the batch); :meth:`Network.backward` seeds
its gradient with ``loss_scale`` (:func:`loss_seed`), and the loss adds ``d(loss)/d(input)``
into its inputs like any layer. A 16-bit loss is that mean, taken in float32, rounded to 16
bits; the layer keeps the float32 one (``wide_mean``), which the Trainer's sums read
(:func:`wide_loss`), and is seeded in float32, which its backward takes as it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module, is_float_dtype, sum_dtype, widened
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target, values_of
from distconv.parameter import UpdateCallback


def _labels(layer: Layer, label: Arg, n: int, n_classes: int, xp: Any) -> Any:
    """The label ids, checked, as an array of ``xp``, the logits' module: host labels beside
    device logits (a hand-written loop; the Trainer moves its feeds) go to the device, as the
    ids of a table or a multiplex do."""
    ids = label.ids if label.ids is not None else label.value
    if ids is None:
        raise layer.fail("the label input carries neither ids nor a value")
    ids = ids.reshape(-1)
    if ids.dtype.kind not in "iu":
        raise layer.fail(f"labels must be integers, got dtype {ids.dtype}")
    if len(ids) != n:
        raise layer.fail(f"{len(ids)} labels for a batch of {n} rows")
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= n_classes):
        raise layer.fail(
            f"labels must lie in [0, {n_classes}), got range [{int(ids.min())}, {int(ids.max())}]"
        )
    return xp.asarray(ids)


def loss_seed(value: Any, loss_scale: float) -> Any:
    """The gradient a backward from the output ``value`` starts with: ``loss_scale`` in each
    element, in ``value``'s dtype, but in float32 where ``value`` is a 16-bit loss (0-d). Each
    loss layer's backward widens its ``dz`` to float32 anyway; rounded to 16 bits first, a
    float16 batch of 3001 was seeded 3000, and every gradient was 1/3001 too small. An output of
    more elements seeded (a probe's, a layer's of one's own) keeps its dtype, and with it the
    rounding of a ``loss_scale`` that dtype cannot hold (float16: 3001 is 3000, past 65504
    inf): a pool writes ``dz`` as its input's gradient, which stays in the input's dtype."""
    xp = get_array_module(value)
    if getattr(value, "ndim", None) != 0:
        return xp.full_like(value, loss_scale)
    return xp.full_like(value, loss_scale, dtype=sum_dtype(value.dtype))


def wide_loss(layer: Layer, mean: Any) -> Any:
    """The loss ``mean`` that ``layer`` output, in float32 where it is 16-bit: the float32 mean
    its last forward kept (``wide_mean``), where ``mean`` is that rounded (a subclass may have
    changed the output since), else ``mean`` widened. On the device, without a sync."""
    loss = widened(mean)
    wide = getattr(layer, "wide_mean", None)
    if wide is None or loss is mean or getattr(wide, "dtype", None) != loss.dtype:
        return loss
    return get_array_module(loss).where(wide.astype(mean.dtype) == mean, wide, loss)


class SoftmaxCrossEntropy(Layer):
    """Mean over the batch of ``-log softmax(logits)[label]``.

    Inputs: ``logits`` ``(N, classes)`` and ``label`` (an Arg whose ``ids``, or integer
    ``value``, holds ``N`` class indices). Output: a 0-d loss.

    A row with a ``+inf`` or NaN logit, or ``-inf`` throughout, has a NaN loss, made
    quietly, as PyTorch's ``cross_entropy`` makes it.

    It takes logits, not probabilities, and applies its own softmax: Paddle's
    ``classification_cost`` takes probabilities, from ``fc(act=softmax)``. A
    :class:`~distconv.network.Network` refuses a layer with a softmax ``act`` under it, or
    passed on to it by a dropout, reshape, concatenation or sequence pool (a softmax of a
    softmax trains badly, with no error).

    Attributes:
        prob: the softmax of the last forward, ``(N, classes)``.
    """

    num_inputs = 2
    #: whether input 0 is logits, so that a softmax ``act`` under it is refused; a subclass of
    #: one's own whose ``_forward`` reads probabilities sets it False
    takes_logits: bool = True

    def _forward(self, logits: Arg, label: Arg) -> Any:
        z = logits.value
        if z is None:
            raise self.fail(
                "input 0 must be the logits, got an ids-only Arg (inputs are [logits, label], "
                "in that order)"
            )
        if not is_float_dtype(z.dtype):
            raise self.fail(
                f"input 0 must be float logits, got {z.dtype} (inputs are [logits, label], "
                f"in that order)"
            )
        if z.ndim != 2:
            raise self.fail(f"expected logits of shape (N, classes), got {tuple(z.shape)}")
        xp = get_array_module(z)
        n, c = z.shape
        if n == 0:
            raise self.fail("an empty batch has no mean loss")
        if c == 0:  # else the labels were blamed: "labels must lie in [0, 0)"
            raise self.fail(f"the logits have no classes: shape {tuple(z.shape)}, need (N, >= 1)")
        self._ids = _labels(self, label, n, c, xp)
        # 16-bit logits in float32: numpy sums bfloat16 in bfloat16, and both the sum over the
        # classes and the mean over the batch stop growing past a few hundred terms
        wide = widened(z)
        # a +inf logit (or a row of -inf) shifts to inf - inf, NaN: its loss is NaN, as PyTorch's,
        # without numpy's "invalid value" warning, which a run under -W error raised from here;
        # finite logits a diverged run drives to both ends of the type (1e308 and -1e308) shift
        # past it, to -inf: a probability of 0, quietly too
        with np.errstate(invalid="ignore", over="ignore"):
            shifted = wide - wide.max(axis=1, keepdims=True)
        picked = xp.take_along_axis(shifted, self._ids[:, None], axis=1)
        # one exp over the logits, in place: the probabilities are the exponentials over their
        # sum, and a log-probability the shifted logit less the sum's log (exp(log_prob), a
        # second exp over every logit, took a third of the time)
        e = xp.exp(shifted, out=shifted)
        norm = e.sum(axis=1, keepdims=True)
        picked -= xp.log(norm)
        e /= norm
        self.prob = e  # kept wide: backward's gradient is cast as it is added
        self.wide_mean = -picked.mean()  # the Trainer's sums read it (wide_loss), not the rounding
        return self.wide_mean.astype(z.dtype, copy=False)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        dx = grad_target(self.inputs[0])
        if dx is None:
            return
        xp = get_array_module(dx)
        n = dx.shape[0]
        # (prob - onehot) * dz / n as the product, the one-hot taken from it: one temporary
        # where a copy of prob was a second, and still added once, rounded once, into dx
        # (a 16-bit one too: prob is float32, and so is the scale, as a 16-bit dz / n
        # rounded 1/3 or 1/100 first, every gradient of a batch of 3 or 100 off by up to an ulp)
        scale = widened(dz) / n
        g = self.prob * scale
        g[xp.arange(n), self._ids] -= scale
        dx += g

    def make_output(self, y: Any, inputs: tuple[Arg, ...]) -> Arg:
        return Arg(y)


class MSELoss(Layer):
    """Mean over every element of ``(pred - target)^2``, as PyTorch's ``MSELoss``.

    Inputs: ``pred`` and ``target`` of the same shape. Output: a 0-d loss. Both inputs get
    gradients if they want them.
    """

    num_inputs = 2

    def _forward(self, pred: Arg, target: Arg) -> Any:
        # float values, both: an integer input failed only in backward, adding float
        # gradients into it
        p, t = values_of(self, pred), values_of(self, target)
        if p.size == 0:
            raise self.fail("an empty batch has no mean loss")
        if pred.shape != target.shape:
            raise self.fail(f"pred shape {pred.shape} differs from target shape {target.shape}")
        diff = p - t
        # a 16-bit difference taken and squared in float32: float16 squares past 256 to
        # infinity (one error of 300 made the loss inf while its mean and every gradient were
        # finite); kept so for backward, whose gradient is then rounded once, as it is added
        # (rounded to 16 bits first, a fifth of them were an ulp off at a scale of 2/3)
        wide = widened(diff)
        if wide is not diff:
            wide = widened(p) - widened(t)
        self._diff = wide
        self.wide_mean = (wide * wide).mean()  # the Trainer's sums read it (wide_loss)
        mean = self.wide_mean
        return mean if wide is diff else mean.astype(diff.dtype)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        # the scale 2 * dz / size in float32 for a 16-bit loss, as the cross-entropy's: in
        # float16 a size past 65504 was inf, and every gradient 0; the product is float32,
        # rounded once as it is added
        g = self._diff * (2 * widened(dz) / self._diff.size)
        pred, target = self.inputs
        if pred.needs_grad:
            pred.grad += g
        if target.needs_grad:
            target.grad -= g

    def make_output(self, y: Any, inputs: tuple[Arg, ...]) -> Arg:
        return Arg(y)
