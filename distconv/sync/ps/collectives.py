"""A parameter-server worker's collectives: the start-up job check, the barrier and metric
sums, each a ``gather`` through shard 0, since workers have no direct links to each other.

Each gather's tag is its kind and the worker's count of its gathers since its latest
``hello`` (``all_equal:1``, ``barrier:2``, ...): shard 0 answers a tag once every live rank has
sent it, so every rank must make the same gathers in the same order. Each setup's hello starts
the count again (:meth:`Collectives._number_anew`), so every rank's first gather of a setup is
``all_equal:1``, whatever gathers its worker made before: a rank told of another rank's failed
setup made a job check (refused) that the failed rank never made, and counted over the worker's
life, its next setup's job check (``all_equal:2``) never met the fixed rank's
(``all_equal:1``), when a script catches the refusal and fits again on every rank.

A metrics sum and the barrier are refused until this worker's first setup has completed, as
``MPISync`` refuses them, before anything is sent (:meth:`Collectives._before_setup`).
Until a setup has made every rank's parameters rank 0's they may differ (each rank's own seed):
shard 0 summed an evaluation before ``fit`` over the ranks' different models into one number,
without a word. A rank that alone sums raises at once, holding nothing on shard 0 (its gather
failed the job where it met another rank's setup). Setup's own barrier is
:meth:`Collectives._meet`.

Both are refused inside a step too (a ``start_step`` with no ``finish_step`` or
``abandon_step`` since), before anything is sent, in ``MPISync``'s words
(:func:`~distconv.sync.closing.refuse_meeting_in_step`): shard 0 summed an evaluation of every
rank that had skipped ``finish_step`` (nothing of the step pushed yet), the epoch's metrics
were printed, a checkpoint could be written of the half step, and only the close said so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from distconv.sync.closing import refuse_meeting_in_step, summing
from distconv.sync.errors import SyncError
from distconv.sync.ps.job_check import check_all_equal, gather_problem
from distconv.sync.ps.wire import short


class Collectives:
    """The collective side of :class:`~distconv.sync.ps.client.PServerSync` (a mixin), which
    sets ``_collective`` to 0 when it is made, and ``_set_up`` once a setup has completed. It
    reads ``rank`` and ``world_size``, and calls the channel's ``_ask_all`` and
    ``_malformed``."""

    rank: int
    world_size: int
    _collective: int  # the gathers made since the latest hello: the next tag counts on
    #: whether a setup of this worker completed, every rank's parameters made rank 0's: the
    #: metrics sums and the barrier are served from then on (a later setup refused changes
    #: nothing, as the sync contract says)
    _set_up: bool = False
    _ask_all: Callable[..., list[tuple[dict[str, Any], list]]]
    _malformed: Callable[[int, object], SyncError]

    def _number_anew(self) -> None:
        """A hello of a setup (or of a failure note): its gathers are numbered from 1 again."""
        self._collective = 0

    def _gather(self, kind: str, value: Any, answer: str = "values") -> Any:
        """Field ``answer`` of shard 0's reply to this rank's next gather of ``kind``, once
        every live rank sent its ``value``: ``values``, by rank (None for a rank lost in async
        mode), or an ``allreduce``'s ``sum``."""
        self._collective += 1
        tag = f"{kind}:{self._collective}"
        ((header, _),) = self._ask_all([(0, {"op": "gather", "tag": tag, "value": value}, ())], tag)
        got = header.get(answer)
        want, own = (
            (self.world_size, (self.rank, value)) if answer == "values" else (len(value), None)
        )
        if (problem := gather_problem(got, answer, want, kind, own)) is not None:
            raise self._malformed(0, f"{tag} answered with {answer} {short(got)}: {problem}")
        return got

    def _before_setup(self, what: str, why: str) -> SyncError:
        """The refusal of a collective (``what``) asked before this worker's first setup
        completed, raised before anything is sent: no other rank is left waiting in a gather
        for this one (see the module docstring). ``why`` says why, and what to do instead."""
        return SyncError(f"rank {self.rank}: {what} before setup: {why}")

    def allreduce_sum(self, values: Sequence[float]) -> list[float]:
        """Sum small metrics over the ranks, in rank order: shard 0 adds them, and refuses
        ranks that sum different numbers of values (other code, another point of the job).

        Raises:
            SyncError: before this worker's first setup completed, or inside a step (no
                ``finish_step`` since its ``start_step``), nothing sent; or the gather failed."""
        if not self._set_up:
            raise self._before_setup(
                summing(len(values)),
                "the ranks' parameters may still differ (each its own initial values), and "
                "the sum would mix their models' metrics (evaluate after fit, whose setup makes "
                "every rank's parameters rank 0's; or in one process, with LocalSync)",
            )
        refuse_meeting_in_step(self, summing(len(values)))
        ours = [float(v) for v in values]
        return [float(v) for v in self._gather("allreduce", ours, answer="sum")]  # checked

    def barrier(self) -> None:
        """Return once every live rank has reached it (through shard 0).

        Raises:
            SyncError: before this worker's first setup completed, or inside a step, nothing
                sent, as under MPI; or the gather failed."""
        if not self._set_up:
            raise self._before_setup(
                "a barrier",
                "the ranks meet once a setup made their parameters rank 0's, under MPI too "
                "(call it after fit)",
            )
        refuse_meeting_in_step(self, "at the barrier")
        self._meet()

    def _meet(self) -> None:
        """The barrier's gather, never refused: setup's own, where the other ranks wait for
        the chief's seed."""
        self._gather("barrier", None)

    def broadcast_parameters(self) -> None:
        """Nothing to send: the shards hold the parameters, which rank 0 seeds and every other
        rank pulls in ``setup``; after a step every rank of a sync job holds the shards' values,
        and of an async one those of its latest pull (the base's one-process version, which
        refuses a strategy of several ranks, is not this transport's)."""

    def all_equal(self, description: Mapping[str, Any]) -> None:
        """Raise :class:`~distconv.sync.errors.JobRefused` where another live rank's
        ``description`` differs (:func:`~distconv.sync.ps.job_check.check_all_equal`)."""
        check_all_equal(self._gather, self.rank, description)  # a digest, then what differs
