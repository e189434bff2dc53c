"""The step's end: each bucket's reduced gradients handed to the optimizer.

Every rank runs the same optimizer on the same sums, so every rank ends the step with
identical parameters. A parameter that fired on no rank is left alone; the ranks' flags
(:mod:`~distconv.sync.mpi.used`) say which.

Where a communication thread reduces the pieces, each bucket is updated as soon as it is
reduced, while the later ones still travel. The flags' wait is queued on the thread behind every
piece, so it is made only where the flags can change something: at the first bucket holding a
parameter that did not fire on this rank (one that fired here was used somewhere). Without the
thread nothing travels while the optimizer runs, so every bucket is reduced first. A 16-bit
bucket can be refused once reduced (a NaN or infinity on the wire, on every rank alike): with
one in the step, every bucket is reduced and checked, and the flags are completed, before any
is updated, so a refused step, or one another rank abandoned, leaves every parameter as it
was. Should a later reduction (an MPI error) or an update fail,
the buckets before it are updated already: the step cannot be finished, and the sync aborts the
job when it closes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from distconv.sync.mpi.buckets import Bucket
from distconv.sync.mpi.pieces import PiecePump
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.used import UsedParams

#: the optimizer on one reduced bucket, given the flags of the parameters that fired anywhere
#: (None: every parameter of the bucket did)
Update = Callable[[Bucket, np.ndarray | None], None]


def update_as_reduced(
    buckets: Sequence[Bucket], thread: CommThread, used: UsedParams, update: Update
) -> None:
    """With the communication thread: each bucket updated once it is reduced, or, with a 16-bit
    bucket in the step, once every bucket is reduced and checked (see above)."""
    flags, waited = None, False
    if any(bucket.compressed for bucket in buckets):  # its refusal must find nothing updated
        for bucket in buckets:
            _reduced(thread, bucket)
        # nothing left to hide the flags' wait behind: a step another rank abandoned fails too
        flags, waited = used.complete(), True
    for bucket in buckets:
        _reduced(thread, bucket)
        if bucket.pending and not waited:  # a parameter that did not fire here
            flags, waited = used.complete(), True
        update(bucket, flags if bucket.pending else None)
    if not waited:
        used.complete()  # MPI must see the exchange complete


def _reduced(thread: CommThread, bucket: Bucket) -> None:
    """Wait until the thread has reduced ``bucket``, then unpack it (a device bucket here, on
    the main thread, which owns the device; once a step): a 16-bit wire is checked by then."""
    if bucket.pieces or bucket.compressed:  # an empty bucket has no request
        thread.wait(bucket)
    bucket.unpack()


def update_after_all(
    buckets: Sequence[Bucket], comm: Any, used: UsedParams, update: Update
) -> None:
    """Without the thread: every bucket reduced (a 16-bit one by hand, here), then updated."""
    flags = used.complete()
    for bucket in buckets:
        if not bucket.pieces:  # a 16-bit wire, reduced by hand
            bucket.reduce(comm, lambda r: r.Wait(), None, None)
        bucket.unpack()
    for bucket in buckets:
        update(bucket, flags)


def drain_abandoned(pump: PiecePump, used: UsedParams) -> None:
    """Send what an abandoned step left of its pieces and complete them (:meth:`PiecePump.drain`:
    on the communication thread, if the pump hands its pieces to one). A rank that abandoned the
    step before another left the other's allreduce unmatched: its thread waited there until
    setup gave up (30 s); without one, the request was dropped pending, its buffer freed under
    MPI. Every rank sends every piece, so every one completes; the sums are dropped (the
    parameters hold gradients of their own since). What the thread unpacks is checked as in a
    step (:meth:`~.buckets.Bucket.check_wire`): a 16-bit wire that holds infinity stops it, and
    every reduction after, on every rank alike (they hold the same bits). The buckets are not
    marked unpacked to skip that: the thread may still be inside one, and a rank whose thread
    then skipped the check, where another's had refused it, sent the next piece alone. The
    step's used-parameter flags are owed too (:meth:`~.used.UsedParams.abandoned`)."""
    pump.drain()
    used.abandoned()
