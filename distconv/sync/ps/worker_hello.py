"""What a parameter-server worker says when it joins its shards at each setup, its ``hello``,
and what it takes from their replies (docs/protocol.md, ``hello``).

The hello carries the job: its description's digest and as much of its text as fits
(:func:`~distconv.sync.ps.job_hello.hello_fields`), whose ``optimizer.lr`` is how a rate set
between fits (``optimizer.set_base_lr``) reaches the shards; the worker's host and process
(:func:`~distconv.sync.ps.processes.whoami`) and its launch's incarnation; and ``setup``, the
worker's number of the setup the hello is of (a count of its run's setups begun, a setup that
failed before its hello included), the same on every hello of one setup, so that a shard tells
a hello said again while ranks are late (:mod:`~distconv.sync.ps.late_ranks`) from the next
setup's. The request's job id, rank and run are added where every request is sent.

From the replies, each checked first (:mod:`~distconv.sync.ps.hello_replies`), the worker
learns the shards' agreed mode and staleness bound, which of them write checkpoint parts, and
their message and frame caps; it refuses shards of releases it cannot run with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from distconv.sync.base import SyncError
from distconv.sync.closing import in_setup
from distconv.sync.ps.endings import takes_abandon
from distconv.sync.ps.hello_replies import check_hello_reply
from distconv.sync.ps.incarnations import incarnation_field
from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.processes import whoami
from distconv.sync.ps.releases import check_releases
from distconv.sync.ps.shard_settings import agreed_settings
from distconv.sync.ps.wire import MAX_MESSAGE_BYTES


class WorkerHello:
    """The hello of :class:`~distconv.sync.ps.client.PServerSync` (a mixin, first among its
    bases: its :meth:`fail_setup` counts the setup before the failure note's hello). It reads
    ``rank``, ``world_size``, ``endpoints`` and the sockets, and sets ``mode``,
    ``max_staleness`` and the caps from the replies."""

    rank: int
    world_size: int
    endpoints: list[str]
    mode: str
    max_staleness: int | None
    _socks: Sequence[Any]
    #: this worker's setups begun, each hello's ``setup`` (set to 0 when the worker is made)
    _setups: int
    _part_writers: list[int]
    _frame_bytes: list[int]
    _abandon_shards: Sequence[int]
    _ask_gone_afresh: Callable[[], None]
    _number_anew: Callable[[], None]
    _ask_hellos: Callable[..., list[tuple[dict[str, Any], list]]]
    _named: Callable[..., str]
    _watch_shards: Callable[[Sequence[tuple[dict[str, Any], list]]], None]
    _set_caps: Callable[[Sequence[int]], None]
    _malformed: Callable[[int, object], SyncError]

    def _hello(self, description: dict[str, Any]) -> list[dict[str, Any]]:
        """Say hello to every shard (``_send`` adds the run; the launch's incarnation here),
        beating each as it answers (:meth:`_ask_hellos`), and check their settings; their
        replies' headers."""
        self._ask_gone_afresh()  # a shard found gone and restarted since answers again
        head = {"op": "hello", **hello_fields(description), **whoami(), **incarnation_field()}
        head["setup"] = self._setups  # a shard tells a hello said again from the next setup's
        self._number_anew()  # every rank's setup starts its gathers at all_equal:1
        replies = self._ask_hellos(head, self._check_hello_reply)
        headers = [h for h, _ in replies]  # one scheme: shards of other modes, bounds refused
        self.mode, self.max_staleness = agreed_settings(headers, self._named)
        check_releases(headers, self.mode, self.rank, self._named)  # at setup, not an epoch on
        self._abandon_shards = takes_abandon(headers)
        self._watch_shards(replies)
        # shards without --checkpoint-dir keep no parts: the chief's checkpoint holds their state
        self._part_writers = [s for s, (h, _) in enumerate(replies) if h.get("checkpoints")]
        self._set_caps([h.get("max_message_bytes", MAX_MESSAGE_BYTES) for h, _ in replies])
        self._frame_bytes = [h.get("max_frame_bytes", MAX_MESSAGE_BYTES) for h, _ in replies]
        return headers

    def fail_setup(self, error: BaseException) -> None:
        """Count a fit that failed before its setup as a setup of its own (its failure
        note's hello says its number), then tell the other ranks (the bases' rule)."""
        self._setups += not in_setup(self)
        super().fail_setup(error)  # type: ignore[misc]

    def _check_hello_reply(self, s: int, h: dict[str, Any]) -> None:
        """Refuse shard ``s``'s hello reply ``h`` where this worker cannot read it, or it is of
        another shard than the one named at position ``s`` (before any beat to it)."""
        check_hello_reply(
            s,
            h,
            endpoint=self.endpoints[s],
            num_shards=len(self._socks),
            workers=self.world_size,
            malformed=self._malformed,
        )
