"""The MPI start-up's first collective, fixed for good: each rank says which distconv it runs.

Every later collective of a setup may change from one release to the next, and ranks of two
releases that wait in collectives that do not match hang until the watchdog's timeout (600 s),
which names a stuck rank, not the cause. So a sync's first setup opens with one exchange that
is never to change: an ``Iallgather`` of three int64, waited for at once (the shape every
meeting's exchange has, :mod:`~distconv.sync.mpi.step_check`), each rank's record

    (:data:`MAGIC`, :data:`STARTUP_VERSION`, the first 64 bits of its build digest)

(:func:`~distconv.build_identity.build_digest`). What follows it is decided by the start-up
version: raise it whenever any collective of setup after this one changes.

- Another magic, or another start-up version: the ranks run setups that cannot meet, so every
  rank that reads this record stops at once (an :class:`OtherRelease`; its close aborts the
  job, making no collective more), naming both ranks' builds. A distconv from before this
  record opened setup with its job check's exchange, the same shape: it sees an unknown code
  and stops at once too. Older ones, whose first collective was another, still hang.
- The same start-up version, another build digest (a comment edited, a file patched on one
  node): rank 0 warns once, naming each rank whose source differs from its own, and the job
  goes on. The job check compares what decides the training (the model, the optimizer, the
  settings), not the code, and a researcher's edit must not stop a job.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from distconv.build_identity import build_id, digest_bits
from distconv.sync.errors import JobRefused
from distconv.sync.mpi.step_check import StepCheck, where

log = logging.getLogger("distconv.sync.mpi")

#: the record's first number, never to change: "dcid" (negative, as every meeting code is, so
#: a distconv from before the record reads it as an unknown meeting, not as a step)
MAGIC = -int.from_bytes(b"dcid", "big")
#: the version of the collectives a setup makes after this record: raise it with any change
STARTUP_VERSION = 1
#: the way on every refusal here names
ONE_RELEASE = "run one release on every rank (distconv --version prints its build)"


class OtherRelease(JobRefused):
    """Ranks run distconv releases whose MPI start-ups differ (or one that predates the
    start-up record): they cannot set up together. Not raised alike: the other rank may run
    code that does something else next, so close aborts the job."""


def record() -> list[int]:
    """This rank's start-up record: magic, start-up version, the build digest's first 64 bits."""
    return [MAGIC, STARTUP_VERSION, digest_bits()]


def _build(row: Sequence[int]) -> str:
    """A rank's build as its record says it: its digest's first 16 hex digits."""
    return f"build {row[2] & (2**64 - 1):016x}"


def introduce(check: StepCheck, rank: int) -> None:
    """Make the start-up record's exchange on ``check``'s communicator and read every rank's.

    Raises:
        OtherRelease: a rank said another magic (no record: a distconv from before it, or a
            rank at another point of the job) or another start-up version.
    """
    rows = check.say_rows(record())
    ours = f"rank {rank} runs distconv {build_id()} (MPI start-up {STARTUP_VERSION})"
    for other, row in enumerate(rows):
        if row[0] != MAGIC:
            raise OtherRelease(
                f"rank {other} did not say which distconv it runs at the start of setup (it said "
                f"{tuple(row)}: {where(row)}): a distconv from before that start-up record, or a "
                f"sync at another point of the job; {ours}: {ONE_RELEASE}"
            )
        if row[1] != STARTUP_VERSION:
            raise OtherRelease(
                f"rank {other} runs another distconv ({_build(row)}, MPI start-up {row[1]}), "
                f"{ours}: their setups cannot meet; {ONE_RELEASE}"
            )
    others = [f"rank {r}: {_build(row)}" for r, row in enumerate(rows) if row[2] != rows[0][2]]
    if rank == 0 and others:
        log.warning(
            "the ranks run different distconv source (%s; rank 0: %s): the job goes on, as "
            "their MPI start-up is the same, but each rank runs its own code; %s",
            ", ".join(others),
            _build(rows[0]),
            ONE_RELEASE.replace("release", "build"),
        )
