"""What :class:`~distconv.sync.mpi.MPISync`'s ``grad_hook`` is given besides the gradients:
the count they divide by to give their means (:func:`mean_divisor`), and the refusal, at setup,
of a layout for which there is none (:func:`refuse_mixed_layout`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from distconv.sync.base import SyncError
from distconv.sync.errors import JobRefused
from distconv.sync.mpi.buckets import Bucket


class HookRefused(JobRefused):
    """A ``grad_hook`` on a job whose buckets hold sums beside averages, refused at setup once
    the buckets are laid out: they are the same on every rank (the job check compared the
    parameters' dtypes and ``grad_dtype``), so every rank raises it alike, none waiting."""

    raised_alike = True


def mixed_sums(buckets: Sequence[Bucket]) -> str | None:
    """Why no one count gives the means of ``buckets``' gradients, naming the dtypes of those
    that hold sums and of those that carried averages (:attr:`~.buckets.Bucket.averages`); None
    where every bucket holds one kind."""
    kinds = {
        k: sorted({str(b.host.dtype) for b in buckets if b.averages == k}) for k in (True, False)
    }
    if not all(kinds.values()):
        return None
    return (
        f"grad_hook: the gradients are sums in some buckets ({', '.join(kinds[False])}) and "
        f"averages in others ({', '.join(kinds[True])}: cast to grad_dtype or 16-bit), so "
        "no one count gives their means; give every parameter one dtype, or a 16-bit "
        "grad_dtype, with which every bucket averages"
    )


def refuse_mixed_layout(hook: Callable[..., Any] | None, buckets: Sequence[Bucket]) -> None:
    """At setup, once ``buckets`` are laid out: refuse a ``hook`` they cannot serve.

    Raises:
        HookRefused: a hook, and buckets holding sums beside averages (:func:`mixed_sums`),
            alike on every rank, before any step.
    """
    said = None if hook is None else mixed_sums(buckets)
    if said is not None:
        raise HookRefused(said)


def mean_divisor(buckets: Sequence[Bucket], total: int) -> int:
    """What a ``grad_hook`` divides the gradients by to have their means: ``total`` (the
    step's global examples) where the buckets hold sums, 1 where they carried averages (a
    ``grad_dtype`` cast, 16-bit gradients: :attr:`~.buckets.Bucket.averages`), so that a clip
    by the mean's norm reads one quantity on every wire.

    Setup refuses a layout of both kinds (:func:`refuse_mixed_layout`); this asks again at
    each step, as ``start_step`` lays the buckets out anew without a setup where a parameter
    was frozen, unfrozen or cast since (a float16 one frozen at setup, unfrozen beside float64).

    Raises:
        SyncError: some buckets hold sums and others averages (parameters of several dtypes:
            16-bit beside wider, or some cast to the wire and others of its dtype), naming
            which: no one divisor gives every mean; raised before any update, on every rank.
    """
    said = mixed_sums(buckets)
    if said is not None:
        raise SyncError(said)
    return 1 if any(b.averages for b in buckets) else total
