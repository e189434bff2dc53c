"""What :class:`~distconv.sync.mpi.MPISync`'s ``grad_hook`` is given besides the gradients:
the count they divide by to give their means (:func:`mean_divisor`).
"""

from __future__ import annotations

from collections.abc import Sequence

from distconv.sync.base import SyncError
from distconv.sync.mpi.buckets import Bucket


def mean_divisor(buckets: Sequence[Bucket], total: int) -> int:
    """What a ``grad_hook`` divides the gradients by to have their means: ``total`` (the
    step's global examples) where the buckets hold sums, 1 where they carried averages (a
    ``grad_dtype`` cast, 16-bit gradients: :attr:`~.buckets.Bucket.averages`), so that a clip
    by the mean's norm reads one quantity on every wire.

    Raises:
        SyncError: some buckets hold sums and others averages (parameters of several dtypes:
            16-bit beside wider, or some cast to the wire and others of its dtype), naming
            which: no one divisor gives every mean; raised before any update, on every rank.
    """
    kinds = {
        k: sorted({str(b.host.dtype) for b in buckets if b.averages == k}) for k in (True, False)
    }
    if all(kinds.values()):
        raise SyncError(
            f"grad_hook: the gradients are sums in some buckets ({', '.join(kinds[False])}) and "
            f"averages in others ({', '.join(kinds[True])}: cast to grad_dtype or 16-bit), so "
            "no one count gives their means; give every parameter one dtype, or a 16-bit "
            "grad_dtype, with which every bucket averages"
        )
    return 1 if kinds[True] else total
