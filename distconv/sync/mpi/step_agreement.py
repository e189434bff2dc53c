"""What a step's check compares besides the step number: the ranks' bucket layouts and their
learning rates, folded into one number of the exchange, and the refusal that names which of
them differs.

The exchange keeps its three int64 a rank (:mod:`~distconv.sync.mpi.step_check`): the start-up
record says its shape is fixed for good, and every meeting between steps opens with the same
shape, so that a rank at a step and one at a meeting meet in it. So the rate rides in the
layout's number: :func:`step_digest` flips the layout hash's bits by the rate's float64 bits.
Ranks with one layout send the same digest exactly when their rates are the same bits (an
exclusive or with one number is one-to-one); ranks whose layouts differ send different digests
(as before, but for a chance of 2**-60). The cost stays one ``Iallgather`` of 24 bytes a rank
a step; only where the digests differ do the ranks gather each one's layout and rate, every
rank alike (:func:`step_mismatch`), to name the difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from distconv.sync.base import SyncError
from distconv.sync.description import first_difference
from distconv.sync.mpi.comm import JobMismatch, allgather_json
from distconv.sync.rate_agreement import first_other_rate, rate_bits, rate_of, rates_differ

#: the key a rank's rate bits go under beside its layout, in a mismatch's gather
RATE_KEY = "lr (float64 bits)"


def step_digest(layout_hash: int, lr: float | None) -> int:
    """The exchange's second number: ``layout_hash`` (60 bits) with its bits flipped by
    ``lr``'s float64 bits; the hash alone for ``lr`` None (a caller with no rate to compare)."""
    return layout_hash if lr is None else layout_hash ^ rate_bits(lr)


def step_mismatch(
    comm: Any, rank: int, step: int, layout: Mapping[str, Any], lr: float | None
) -> SyncError:
    """The refusal of ``step``, whose digests differed: the ranks' rates where any rank's
    differs from this one's (both ranks, both rates, the way out), else their bucket layouts.
    The rates' is a :class:`~.comm.JobMismatch`, as setup's job check raises: every rank
    raises it alike, before any gradient collective, so each ends in one line, exit 1, none
    left waiting (a schedule is the job's configuration); the layouts' stays a SyncError.

    A collective (every rank's layout and rate are gathered): call it on every rank, as every
    rank saw the digests differ. Ranks of a distconv whose exchange carried no rate gather
    their layout alone, in the same two collectives, and are named by their layout.
    """
    ours = {**layout, RATE_KEY: None if lr is None else rate_bits(lr)}
    every = allgather_json(comm, ours)
    rates = {r: rate_of(d[RATE_KEY]) for r, d in enumerate(every) if d.get(RATE_KEY) is not None}
    if rank in rates:
        other = first_other_rate(rates, rank)
        if other is not None:
            ranks = (rank, rates[rank]), (other, rates[other])
            return JobMismatch(rates_differ(step, *ranks))  # alike: one line, no abort
    return _layout_mismatch(rank, step, [_layout_of(d) for d in every])


def _layout_of(said: Mapping[str, Any]) -> dict[str, Any]:
    """A rank's layout as gathered: its description without the rate."""
    return {key: value for key, value in said.items() if key != RATE_KEY}


def _layout_mismatch(rank: int, step: int, layouts: Sequence[Mapping[str, Any]]) -> SyncError:
    """The refusal naming this rank and the first rank whose layout differs from its own."""
    other = next((r for r, laid in enumerate(layouts) if laid != layouts[rank]), None)
    if other is None:  # digests differ and nothing they fold does: another build's exchange
        return SyncError(
            f"step {step}: the ranks' step checks differ, yet each lays out its buckets and "
            "sets its rate alike: they run different distconv builds; run one on every rank "
            "(distconv --version prints its build)"
        )
    diff = first_difference(layouts[rank], layouts[other])
    return SyncError(
        f"step {step}: rank {rank} and rank {other} lay out gradient buckets "
        f"differently (parameters fired in another order?): {diff}"
    )
