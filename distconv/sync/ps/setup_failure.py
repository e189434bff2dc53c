"""A parameter-server worker that cannot set up tells the other workers, through the shards
(:meth:`SetupFailure.fail_setup`): they waited in their start-up job check for it until the
shards' timeout, its close (a sync never set up says no bye) telling them nothing.

It says ``hello`` to the shards with a description naming its error alone (``name``:
"setup failed on rank R before its job check: Type: text"), then ``bye``. The shards read it
as a failure note (:mod:`~distconv.sync.ps.setup_notes`), not as a job: shard 0 answers every
other worker's start-up gather, held or still to come, at once with "rank R could not set up:
Type: text" (``refused: job``: a ``JobRefused`` marked as telling of R's failure, its
``told_of`` read from those words where the reply arrives, so that its worker is R's victim,
exit 75: :func:`~distconv.sync.peers.told_failure`). The note binds no job and fails none, and its
``bye`` counts for nothing, so that a fit with the error fixed (every rank failing alike: NaN
data, an empty set) goes on on the same shards. The refusal of its own hello is dropped here;
it never joins the gather (a shard older than the notes took the hello as a job's, and
answered the others as the ranks' different jobs: the gather is still made, for it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from distconv.messages import described
from distconv.notes import add_note
from distconv.sync.errors import JobRefused, SyncError, setup_failure_description
from distconv.sync.others_told import others_told
from distconv.sync.ps.beats import HeartbeatOwner


class SetupFailure(HeartbeatOwner):
    """The failed start of :class:`~distconv.sync.ps.client.PServerSync` (a mixin), whose
    hello beats as a setup's: the heartbeat's owner. It reads ``world_size`` and ``closed``,
    and calls the sync's ``_hello``, ``all_equal`` and ``_say_bye``."""

    world_size: int
    closed: bool
    _hello: Callable[[dict[str, Any]], list[dict[str, Any]]]
    all_equal: Callable[[Mapping[str, Any]], None]
    _say_bye: Callable[[], None]

    def fail_setup(self, error: BaseException) -> None:
        """This rank cannot set up (``error``): say hello with a description naming
        ``error`` and say bye (see the module docstring), then return; the caller raises
        ``error`` next (its bye then carries it, from an ``except`` clause, as
        ``Trainer.fit``'s). The shards' refusal of that hello (in the note's words) is
        dropped, and so is a shard that cannot be reached: ``error`` is the cause, its note
        saying whether the others were told (:func:`told_note`). A script
        may set up again (a new hello), or close. Nothing on a closed sync, or with one
        worker (none waits for it)."""
        if self.closed or self.world_size == 1:
            return
        try:
            text = described(error)
        except Exception:  # its __str__ raised (user code): the others are told all the same
            text = f"{type(error).__name__} (its text could not be made)"
        description = setup_failure_description(self.rank, text)
        refused: SyncError | None = None
        try:  # the hello stops a second setup's beats, and beats as setup's (HeartbeatOwner)
            try:
                self._hello(description)
                self.all_equal(description)
            except SyncError as exc:  # dropped: ``error`` is the cause; its note says which
                refused = exc
        finally:
            self._stop_heartbeat()
            # now, not at close, which may never come: an older shard that took the hello as
            # a job's fails the gather the others wait in at its bye
            self._say_bye()
        add_note(error, told_note(self.rank, refused))


def told_note(rank: int, refused: SyncError | None) -> str:
    """The note on rank ``rank``'s setup error after its failure note's hello: that the others
    were told (:func:`~distconv.sync.others_told.others_told`) where the shards refused the
    hello in the note's own words (a :class:`JobRefused` telling of ``rank``), else that they
    may not have been, with what ``refused`` it instead (a shard that cannot be reached: the
    note said the others were told and stop naming this rank, while they waited for the
    shard)."""
    if refused is None or (isinstance(refused, JobRefused) and refused.told_of == rank):
        return others_told(rank)
    return f"the other ranks may not have been told of this error: {described(refused)}"
