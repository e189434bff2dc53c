"""What a worker tells its shards when its run or a step of it ends on an exception: the fields
its ``bye`` and its ``abandon`` carry (:func:`ending_fields`), and the ``abandon`` itself
(:class:`AbandonNote`, a mixin of :class:`~distconv.sync.ps.client.PServerSync`).

In sync mode every shard waits, each step, for every worker's push of each parameter. A worker
whose step raised (after its forward, before its pushes, say) pushes no more of it; the others
have pushed and wait for the step's values. The shards learnt that only from the worker's
``bye`` (sent as the error propagates through a ``finally: sync.close()``), from its process's
end (on the shard's own host alone, and named "killed or crashed") or at their ``--timeout``
("sent nothing", 60 s by default). A script that catches the error and goes on, an interactive
session, or one that ends without ``close()`` left the others waiting that long, without the
cause. So ``abandon_step`` tells every shard that lists the ``abandon`` feature which step will
not finish, with the error: a shard holding another rank's push of that step that this worker
never pushed fails the step at once, naming the worker and its error, as a ``bye`` does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import zmq

from distconv.messages import described
from distconv.sync.base import closing_error
from distconv.sync.errors import SyncError
from distconv.sync.peers import peer_failure

#: the feature a shard's ``hello`` reply lists where it takes an ``abandon``
ABANDON = "abandon"


def ending_fields(error: BaseException | None) -> dict[str, Any]:
    """What a ``bye`` (or an ``abandon``) says of the exception ``error`` that ends this
    worker's run (or step), if any: ``error``, its one line, and where it is another rank's
    failure (a :class:`~distconv.sync.peers.PeerFailed`), ``failed_ranks``, the ranks it
    failed for: they, not this one, are to blame. An error whose message cannot be written
    (its ``__str__`` raises) is named by its type: ``abandon_step`` must not raise, and
    neither must ``close``."""
    if error is None:
        return {}
    try:
        said = described(error)
    except Exception:  # its __str__ raised (user code): the note goes all the same
        said = f"{type(error).__name__} (its text could not be made)"  # as fail_setup says
    fields: dict[str, Any] = {"error": said}
    peer = peer_failure(error)
    if peer is not None:
        fields["failed_ranks"] = list(peer.ranks)
    return fields


def takes_abandon(replies: Sequence[Mapping[str, Any]]) -> list[int]:
    """The shards whose ``hello`` replies list the ``abandon`` feature (one of an older
    release would refuse the op, and log it as a bad request)."""
    listed = [h.get("features") for h in replies]
    return [s for s, f in enumerate(listed) if isinstance(f, list) and ABANDON in f]


class AbandonNote:
    """``abandon_step`` that tells the shards (see the module). Uses the sync's ``mode``,
    ``params``, ``_step``, ``_send`` and ``_drop_replies`` (the reply is waited for by nobody)."""

    mode: str
    params: list[Any]
    closed: bool
    _step: int
    #: the shards that take an ``abandon`` (:func:`takes_abandon`), set at each setup
    _abandon_shards: Sequence[int] = ()

    def abandon_step(self) -> None:
        """The step ends unfinished (see the contract); in sync mode each shard that takes it
        is told so (``abandon``: the step and the exception propagating), without waiting for
        a reply. Must not raise."""
        super().abandon_step()  # type: ignore[misc]  # what the step kept is let go of first
        if self.mode != "sync" or not self.params or self.closed:  # no socket to tell on
            return
        note = {"op": "abandon", "step": self._step, **ending_fields(closing_error())}
        for shard in self._abandon_shards:
            with contextlib.suppress(SyncError, zmq.ZMQError):  # a dropped connection: nothing
                rid = self._send(shard, note, patience=0.0)  # type: ignore[attr-defined]
                self._drop_replies({rid})  # type: ignore[attr-defined]  # nobody waits for it
